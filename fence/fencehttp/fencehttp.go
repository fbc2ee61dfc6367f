// Package fencehttp fences an HTTP resource: a client round-tripper that carries the holder's
// fencing token in the Simba-Fencing-Token header, and a server middleware that rejects a
// request whose token is lower than the highest it has seen for the request's resource.
//
// # What a resource is
//
// The resource of a request is Guard.Resource(request); by default its URL path, so
// /invoices/42 and /invoices/43 are fenced apart, and a holder of invoice 43's lock never
// blocks invoice 42. To fence a collection as one resource (one lock guards many paths), map
// them to one name, e.g. func(*http.Request) string { return "invoices" }. The default
// compares paths byte for byte: /invoices/42/ (and, with no ServeMux in front to clean paths,
// /invoices//42) is a resource of its own, with a highest token of its own, so a handler that
// serves one record under several spellings must map them to one name in Resource, or a stale
// holder can write through a spelling the newer holder never used.
//
// A resource here is any string: the guard keeps it only in memory, so fence.ValidateResource's
// rule (which fencesql and fenceredis apply, for their table column and hash tag) does not
// bind it, and a path longer than fence.MaxResourceLen, with braces or escaped non-ASCII bytes,
// is fenced as it is. A Resource that maps requests to names also passed to fencesql or
// fenceredis (fencing the storage behind the handler) must return names that rule accepts.
//
// # What the guard promises
//
// Requests of one resource that carry tokens run the handler one at a time: the guard checks
// the token, records it as the highest seen and runs the handler while holding the resource,
// so a slow request with token 5 can never land after a request with token 6 started. The
// other requests of the resource wait meanwhile: a client paused mid-request (its body half
// sent) holds the resource until it resumes or the server's timeouts end the request (set
// http.Server's ReadTimeout, which by default is none), and a waiting request whose context
// ends gets 503 and is never admitted, so a write its client was told had failed does not run
// later: the timeout of an http.TimeoutHandler in front of the guard (whose 503 the client
// gets), an HTTP/2 stream the client reset, or a closed HTTP/1.1 connection, which net/http
// notices only for a request without a body (or whose body was read). The
// highest tokens live in the process's memory, one small entry per resource ever seen: a
// restart forgets them, and two server processes do not share them. A handler that writes to
// a database or Redis should therefore fence that write as well — fencehttp.Token gives it the
// request's token to pass to fencesql or fenceredis, which keep the highest token with the
// data.
//
// A rejected request gets 409 Conflict, with the highest token seen in the
// Simba-Fencing-Highest header; the Transport turns that answer into a *fence.StaleTokenError
// (errors.Is(err, fence.ErrStaleToken) through http.Client.Do).
package fencehttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/simba-go/simba/fence"
)

const (
	// Header carries the fencing token of a request, a decimal int64.
	Header = "Simba-Fencing-Token"
	// HighestHeader carries, on a 409 rejection, the highest token the resource has seen.
	HighestHeader = "Simba-Fencing-Highest"
	// ResourceHeader carries, on a 409 rejection, the resource that refused the token.
	ResourceHeader = "Simba-Fencing-Resource"
)

// ErrNoToken is matched (errors.Is) when a request carries no fencing token and the guard
// requires one, or carries one that is not a non-negative decimal int64.
var ErrNoToken = errors.New("fencehttp: missing or malformed " + Header + " header")

type tokenKey struct{}

// WithToken returns a context carrying token: a request made with it through a Transport
// carries the token in its Simba-Fencing-Token header. Inside a Guard's handler, the request's
// context carries the admitted token the same way (Token).
func WithToken(ctx context.Context, token int64) context.Context {
	return context.WithValue(ctx, tokenKey{}, token)
}

// Token returns the fencing token ctx carries (WithToken, or the admitted token inside a
// Guard's handler).
func Token(ctx context.Context) (int64, bool) {
	t, ok := ctx.Value(tokenKey{}).(int64)
	return t, ok
}

// SetToken sets the Simba-Fencing-Token header of req.
func SetToken(req *http.Request, token int64) {
	req.Header.Set(Header, strconv.FormatInt(token, 10))
}

// ParseToken reads the Simba-Fencing-Token header of h; ok is false when it is absent. A
// present header that is not a non-negative decimal int64 is an error matching ErrNoToken.
func ParseToken(h http.Header) (token int64, ok bool, err error) {
	v := h.Values(Header)
	if len(v) == 0 {
		return 0, false, nil
	}
	if len(v) > 1 {
		return 0, true, fmt.Errorf("%w: %d values", ErrNoToken, len(v))
	}
	t, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil || t < 0 || v[0][0] == '+' {
		return 0, true, fmt.Errorf("%w: %q", ErrNoToken, v[0])
	}
	return t, true, nil
}

// Transport is an http.RoundTripper that carries the fencing token of each request's context
// (WithToken) in the Simba-Fencing-Token header — unless the request sets the header itself —
// and turns a guard's 409 rejection into a *fence.StaleTokenError (closing the response body).
// Every other response, any status, is returned as it is.
type Transport struct {
	// Base makes the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
}

// RoundTrip sends req with its token (on a clone: req is not modified).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	token, has := Token(req.Context())
	if has && req.Header.Get(Header) == "" {
		req = req.Clone(req.Context())
		SetToken(req, token)
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if stale := StaleError(resp); stale != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		_ = resp.Body.Close()
		return nil, stale
	}
	return resp, nil
}

// StaleError returns the *fence.StaleTokenError a guard's rejection carries, or nil when resp
// is not one (any other status, or a 409 without the guard's headers).
func StaleError(resp *http.Response) *fence.StaleTokenError {
	if resp.StatusCode != http.StatusConflict {
		return nil
	}
	highest, err := strconv.ParseInt(resp.Header.Get(HighestHeader), 10, 64)
	if err != nil {
		return nil
	}
	token := int64(-1) // unknown: the request is not at hand
	if resp.Request != nil {
		if t, ok, err := ParseToken(resp.Request.Header); ok && err == nil {
			token = t
		}
	}
	return &fence.StaleTokenError{Resource: resp.Header.Get(ResourceHeader), Token: token, Highest: highest}
}

// Guard is the server middleware: Wrap(next) admits a request to next only if its token is at
// least the highest seen for its resource. The zero Guard is ready to use: the resource is
// the URL path and a request without a token is refused.
type Guard struct {
	// Resource names a request's resource; nil means the URL path (see the package doc).
	Resource func(*http.Request) string
	// AllowMissing lets requests without a Simba-Fencing-Token header through, unfenced (for
	// a handler that also serves readers). By default they get 428 Precondition Required.
	AllowMissing bool

	mu        sync.Mutex
	resources map[string]*resourceState
}

// resourceState is one resource: the highest token admitted, and the lock a request holds
// while its handler runs.
type resourceState struct {
	// run is the lock, a channel of capacity one (full while held) rather than a sync.Mutex,
	// so that a request can stop waiting for it when its client gives up.
	run     chan struct{}
	highest int64 // guarded by run
	seen    bool  // guarded by run
}

func (st *resourceState) lock()   { st.run <- struct{}{} }
func (st *resourceState) unlock() { <-st.run }

// lockCtx takes the lock unless ctx ends first. A ctx that has ended by the time the lock is
// taken gives it back: a request whose client is gone is never admitted, even when the lock
// and ctx's end are ready together.
func (st *resourceState) lockCtx(ctx context.Context) error {
	select {
	case st.run <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if err := ctx.Err(); err != nil {
		st.unlock()
		return context.Cause(ctx)
	}
	return nil
}

// Wrap returns next guarded: a request with a token below its resource's highest gets 409
// Conflict (with the Simba-Fencing-Highest and Simba-Fencing-Resource headers); one without a
// token 428 Precondition Required (unless AllowMissing), one with a malformed token 400 Bad
// Request, and one whose context ends while it waits for its resource (held by another
// request's handler) 503 Service Unavailable. An admitted request runs next while holding its
// resource, with its token in the context (Token).
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok, err := ParseToken(r.Header)
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		case !ok && g.AllowMissing:
			next.ServeHTTP(w, r)
			return
		case !ok:
			http.Error(w, ErrNoToken.Error(), http.StatusPreconditionRequired)
			return
		}
		resource := g.resourceOf(r)
		st := g.state(resource)
		// Wait for the resource only as long as the client does: a request parked behind a
		// slow handler (a holder paused mid-upload) whose client gave up must not run later,
		// recording its token and writing what its client was told had failed.
		if err := st.lockCtx(r.Context()); err != nil {
			http.Error(w, fmt.Sprintf("fencehttp: gave up waiting for resource %q: %v", resource, err), http.StatusServiceUnavailable)
			return
		}
		defer st.unlock()
		if st.seen && token < st.highest {
			stale := &fence.StaleTokenError{Resource: resource, Token: token, Highest: st.highest}
			w.Header().Set(HighestHeader, strconv.FormatInt(st.highest, 10))
			w.Header().Set(ResourceHeader, resource)
			http.Error(w, stale.Error(), http.StatusConflict)
			return
		}
		st.highest, st.seen = token, true
		next.ServeHTTP(w, r.WithContext(WithToken(r.Context(), token)))
	})
}

// Check reports whether token would be admitted for resource now: nil, or a
// *fence.StaleTokenError. It records nothing, and waits while a handler of resource runs.
func (g *Guard) Check(resource string, token int64) error {
	st := g.state(resource)
	st.lock()
	defer st.unlock()
	if st.seen && token < st.highest {
		return &fence.StaleTokenError{Resource: resource, Token: token, Highest: st.highest}
	}
	return nil
}

// Highest returns the highest token admitted for resource, and whether there was any.
func (g *Guard) Highest(resource string) (int64, bool) {
	st := g.state(resource)
	st.lock()
	defer st.unlock()
	return st.highest, st.seen
}

func (g *Guard) resourceOf(r *http.Request) string {
	if g.Resource != nil {
		return g.Resource(r)
	}
	return r.URL.Path
}

func (g *Guard) state(resource string) *resourceState {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.resources == nil {
		g.resources = map[string]*resourceState{}
	}
	st := g.resources[resource]
	if st == nil {
		st = &resourceState{run: make(chan struct{}, 1)}
		g.resources[resource] = st
	}
	return st
}
