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
// highest tokens live in the process's memory: a restart forgets them, and two server
// processes do not share them. A handler that writes to a database or Redis should therefore
// fence that write as well — fencehttp.Token gives it the request's token to pass to fencesql
// or fenceredis, which keep the highest token with the data.
//
// A rejected request gets 409 Conflict, with the highest token seen in the
// Simba-Fencing-Highest header; the Transport turns that answer into a *fence.StaleTokenError
// (errors.Is(err, fence.ErrStaleToken) through http.Client.Do).
//
// # Which tokens to trust
//
// A token that is not one the resource's lease granted does harm the moment it is admitted: a
// token of another lease name (on SQL, ZooKeeper and etcd a busy name's tokens dwarf a quiet
// one's), a client's bug, or the int64 maximum raise the resource's highest for good, and every
// legitimate holder after it gets 409 until the process restarts (for fencesql and
// fenceredis, forever). Set Guard.Verify — fence.LeaseVerifier(backend, lease) checks the
// token against the backend's view of the lease; map the resource to its lease (lease, or
// Resource), as the default resource, the URL path, is never a lease name — and a token that
// would raise the highest (a resource's first token too) is admitted only if the lock service
// confirms it: 403 Forbidden otherwise (fence.ErrUnverifiedToken through the Transport), 503
// when the verifier cannot tell; either way nothing is recorded. A token equal to the highest
// is not checked again, so it costs one check per tenure and resource, not one per request.
// Each check reads the backend, so a client that sends ever new resources or tokens costs one
// read each: a read of that one lease on every backend Simba ships (spi.LeaseInspector: one
// query by primary key on SQL, one round trip on Redis), not of the whole backend, but a read
// all the same, and new resources fill the guard (see Memory): authenticate clients before
// the guard.
//
// # Memory
//
// The guard keeps one entry per resource it admitted a token to (about 230 bytes with a
// 17-byte path, BenchmarkGuardMemory), and never drops one: an entry it forgot would admit the
// stale holder it exists to stop. So it is bounded instead: past MaxResources
// (DefaultMaxResources when zero) a request for a new resource gets 503 Service Unavailable
// (ErrTooManyResources through the Transport) while the known resources are served as
// before. Requests that are refused (400, 403, 428, 503) or whose client gave up leave no
// entry behind, so with Verify an entry costs a token the lock service granted. With the
// default resource, the URL path, any client can otherwise fill the guard with distinct
// paths: map requests to a bounded set of names in Resource, or raise MaxResources.
//
// Forgetting an entry would be safe only if every token re-learnt afterwards were proven to be
// its lease's current one by a read that sees every grant made before it: LeaseVerifier's
// check asks the right question, but a ZooKeeper read is served by whichever server the client
// is connected to and may lag the grant of a newer tenure, so a verifier cannot promise that
// on every backend, and the guard does not rely on it.
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
	"github.com/simba-go/simba/internal/printable"
)

const (
	// Header carries the fencing token of a request, a decimal int64.
	Header = "Simba-Fencing-Token"
	// HighestHeader carries, on a 409 rejection, the highest token the resource has seen.
	HighestHeader = "Simba-Fencing-Highest"
	// ResourceHeader carries, on a rejection (409, 403, or 503 for a guard out of room), the
	// resource that refused the token, its control and format characters and invalid UTF-8
	// bytes escaped as Go escapes them (\x00, \u202e), which a header cannot carry as they are.
	ResourceHeader = "Simba-Fencing-Resource"
	// RefusedHeader says, on a guard's rejection, why: "stale" (409), "unverified" (403:
	// Guard.Verify refused the token) or "too-many-resources" (503: Guard.MaxResources).
	RefusedHeader = "Simba-Fencing-Refused"
)

const (
	refusedStale      = "stale"
	refusedUnverified = "unverified"
	refusedTooMany    = "too-many-resources"
)

// ErrNoToken is matched (errors.Is) when a request carries no fencing token and the guard
// requires one, or carries one that is not a token as Simba writes it: a non-negative decimal
// int64 in its canonical form (see ParseToken; "007", "+7" and "-0" are refused).
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
// present header that is not a token as Simba writes it (SetToken: strconv.FormatInt) is an
// error matching ErrNoToken that says what is wrong with it: the value must be a plain
// decimal int64 of ASCII digits, "0" or without leading zeros, with no sign ("+7", "-0"), no
// leading zero ("007"), no space inside or around it (net/http trims the spaces around a
// header value it reads off the wire) and nothing else. Only the canonical spelling is
// accepted, so a token has one spelling: a proxy or log that compares or keys on the header's
// text sees the same token the guard admits, and a client's encoding bug is refused at once
// rather than read as a number that happens to parse.
func ParseToken(h http.Header) (token int64, ok bool, err error) {
	v := h.Values(Header)
	if len(v) == 0 {
		return 0, false, nil
	}
	if len(v) > 1 {
		return 0, true, fmt.Errorf("%w: %d values", ErrNoToken, len(v))
	}
	t, why := parseCanonical(v[0])
	if why != "" {
		return 0, true, fmt.Errorf("%w: %q: %s", ErrNoToken, v[0], why)
	}
	return t, true, nil
}

// parseCanonical parses s as a token written by SetToken, or says why it is not one.
func parseCanonical(s string) (int64, string) {
	switch {
	case s == "":
		return 0, "empty (want a plain decimal such as 42)"
	case s[0] == '+' || s[0] == '-':
		return 0, "a sign (tokens are non-negative and written without one)"
	case len(s) > 1 && s[0] == '0' && isDigits(s):
		return 0, "leading zeros (tokens are written without them: 7, not 007)"
	case !isDigits(s):
		return 0, "not a plain decimal (ASCII digits only: no spaces, separators, fraction or exponent)"
	}
	t, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, "out of range (above the int64 maximum 9223372036854775807)"
	}
	return t, ""
}

// isDigits reports whether s is one or more ASCII digits.
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// Transport is an http.RoundTripper that carries the fencing token of each request's context
// (WithToken) in the Simba-Fencing-Token header — unless the request sets the header itself —
// and turns a guard's rejection into an error (RefusedError: a *fence.StaleTokenError for 409,
// a *fence.UnverifiedTokenError for 403, a *TooManyResourcesError for 503), closing the
// response body. Every other response, any status, is returned as it is.
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
	if refused := RefusedError(resp); refused != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		_ = resp.Body.Close()
		return nil, refused
	}
	return resp, nil
}

// RefusedError returns the error a guard's rejection of a token carries, or nil when resp is
// not one: a *fence.StaleTokenError for 409 (StaleError), a *fence.UnverifiedTokenError for
// 403 with the Simba-Fencing-Refused header "unverified", a *TooManyResourcesError (Limit
// zero: the client does not know it) for 503 with "too-many-resources".
func RefusedError(resp *http.Response) error {
	if stale := StaleError(resp); stale != nil {
		return stale
	}
	switch {
	case resp.StatusCode == http.StatusForbidden && resp.Header.Get(RefusedHeader) == refusedUnverified:
		token := int64(-1) // unknown: the request is not at hand
		if resp.Request != nil {
			if t, ok, err := ParseToken(resp.Request.Header); ok && err == nil {
				token = t
			}
		}
		return &fence.UnverifiedTokenError{Resource: resp.Header.Get(ResourceHeader), Token: token}
	case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(RefusedHeader) == refusedTooMany:
		return &TooManyResourcesError{Resource: resp.Header.Get(ResourceHeader)}
	}
	return nil
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

// DefaultMaxResources is the number of resources a Guard with MaxResources zero keeps at
// most: about 15 MiB of entries with 17-byte paths (see the package doc, Memory).
const DefaultMaxResources = 1 << 16

// ErrTooManyResources is matched (errors.Is) when a Guard refuses a request for a resource it
// has no entry for because it keeps MaxResources already, detailed by *TooManyResourcesError.
var ErrTooManyResources = errors.New("fencehttp: too many fenced resources")

// ErrInvalidGuard is matched (errors.Is) when a Guard's settings are unusable (a negative
// MaxResources): its requests get 500 Internal Server Error and Check returns the error.
var ErrInvalidGuard = errors.New("fencehttp: invalid Guard")

// TooManyResourcesError is a request for a new resource that a full Guard refused (503
// Service Unavailable): it forgets no recorded highest token to make room, since forgetting
// one would admit a stale holder of that resource.
type TooManyResourcesError struct {
	// Resource is the resource that got no entry.
	Resource string
	// Limit is the guard's MaxResources (or DefaultMaxResources).
	Limit int
}

// Error names the resource and the limit.
func (e *TooManyResourcesError) Error() string {
	return fmt.Sprintf("%v: resource %q refused: the guard keeps the highest tokens of %d resources already (Guard.MaxResources)", ErrTooManyResources, e.Resource, e.Limit)
}

// Is makes errors.Is(err, ErrTooManyResources) true.
func (e *TooManyResourcesError) Is(target error) bool { return target == ErrTooManyResources }

// Guard is the server middleware: Wrap(next) admits a request to next only if its token is at
// least the highest seen for its resource (and, with Verify, only if a token that would raise
// it is one the lock service granted). The zero Guard is ready to use: the resource is the URL
// path, a request without a token is refused, every token is trusted and at most
// DefaultMaxResources resources are kept. Set Verify in production (see the package doc).
type Guard struct {
	// Resource names a request's resource; nil means the URL path (see the package doc).
	Resource func(*http.Request) string
	// AllowMissing lets requests without a Simba-Fencing-Token header through, unfenced (for
	// a handler that also serves readers). By default they get 428 Precondition Required.
	AllowMissing bool
	// Verify, when set, is asked about every token that would raise its resource's highest token
	// (a resource's first token included) before the request is admitted; a token equal to the
	// highest is admitted without asking, so it is one call per tenure. A refusal matching
	// fence.ErrUnverifiedToken gets 403 Forbidden, any other error 503 Service Unavailable; either
	// way nothing is recorded and the handler does not run. It is asked without holding the
	// resource, so the holder's requests with the admitted token go on while a slow or unreachable
	// lock service keeps it (bound it with the request's context or inside Verify), and a
	// confirmed token is compared with the highest again before it is admitted. A resource's
	// checks run one at a time: other new tokens wait for the one under way (503 if their context
	// ends first), then look at the highest again. fence.LeaseVerifier is the ready-made one. Nil
	// trusts every token: a token of another lease name or a made-up one (the int64 maximum) then
	// raises the highest for good, and every legitimate holder after it gets 409 until the process
	// restarts.
	Verify fence.Verifier
	// MaxResources bounds the resources whose highest token the guard keeps (one entry each,
	// never dropped); zero means DefaultMaxResources, a negative value is an error
	// (ErrInvalidGuard). A request for a resource beyond it
	// gets 503 Service Unavailable (*TooManyResourcesError) while the known resources go on
	// being served. Requests that are refused or give up leave no entry behind.
	MaxResources int

	mu        sync.Mutex
	resources map[string]*resourceState
	// verifying holds, per resource whose token Verify is checking, a channel closed when
	// the check ends (guarded by mu): one check per resource at a time, so a flood of new
	// tokens costs the lock service one read at a time, as when checks held the resource.
	// Only resources being checked have one, so an entry costs no more for it.
	verifying map[string]chan struct{}
}

// resourceState is one resource: the highest token admitted, and the lock a request holds
// while its handler runs.
type resourceState struct {
	// run is the lock, a channel of capacity one (full while held) rather than a sync.Mutex,
	// so that a request can stop waiting for it when its client gives up.
	run     chan struct{}
	highest int64 // guarded by run
	// seen is set once a token is admitted, holding both run and Guard.mu; read under either.
	// A seen entry is never dropped.
	seen bool
	refs int // guarded by Guard.mu: requests holding or waiting for run
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
// token 428 Precondition Required (unless AllowMissing), one with a malformed token (not a
// canonical decimal: see ParseToken) 400 Bad Request, its body saying what is wrong, one whose token Verify refuses 403 Forbidden (with Simba-Fencing-Resource), and 503
// Service Unavailable one whose context ends while it waits for its resource (held by another
// request's handler), one whose Verify fails otherwise, and one for a new resource beyond
// MaxResources (500 Internal Server Error if MaxResources is negative). An admitted request
// runs next while holding its resource, with its token in the context (Token).
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
		st, err := g.acquire(resource)
		if errors.Is(err, ErrInvalidGuard) {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if err != nil {
			refuse(w, resource, refusedTooMany, http.StatusServiceUnavailable, err.Error())
			return
		}
		defer g.release(resource, st)
		if !g.admit(w, r, resource, st, token) {
			return
		}
		defer st.unlock()
		st.highest = token
		if !st.seen {
			g.mu.Lock()
			st.seen = true
			g.mu.Unlock()
		}
		next.ServeHTTP(w, r.WithContext(WithToken(r.Context(), token)))
	})
}

// admit takes st's lock for a request with token and returns true holding it, or answers
// the request with its refusal and returns false, not holding it.
//
// With Verify, a token that would raise the highest is verified with the lock let go: while
// the lock service answers slowly or not at all (a blackholed link, where a PostgreSQL
// verifier's read waited for minutes), the holder's writes with its admitted token used to
// wait behind the check, and any client sending a new token could stall the resource so.
// Verifying unlocked is sound as raise.Check's early read is: the highest only grows, and it
// is read again once the lock is back, so a token that a newer one passed meanwhile is
// refused as stale.
func (g *Guard) admit(w http.ResponseWriter, r *http.Request, resource string, st *resourceState, token int64) bool {
	verified := false
	for {
		// Wait for the resource only as long as the client does: a request parked behind a
		// slow handler (a holder paused mid-upload) whose client gave up must not run later,
		// recording its token and writing what its client was told had failed.
		if err := st.lockCtx(r.Context()); err != nil {
			http.Error(w, fmt.Sprintf("fencehttp: gave up waiting for resource %q: %v", resource, err), http.StatusServiceUnavailable)
			return false
		}
		if st.seen && token < st.highest {
			stale := &fence.StaleTokenError{Resource: resource, Token: token, Highest: st.highest}
			w.Header().Set(HighestHeader, strconv.FormatInt(st.highest, 10))
			st.unlock()
			refuse(w, resource, refusedStale, http.StatusConflict, stale.Error())
			return false
		}
		if verified || g.Verify == nil || (st.seen && token == st.highest) {
			return true
		}
		st.unlock()
		ran, err := g.verify(r.Context(), resource, token)
		switch {
		case err == nil:
			verified = ran // after waiting out another check, look at the highest again
		case errors.Is(err, fence.ErrUnverifiedToken):
			refuse(w, resource, refusedUnverified, http.StatusForbidden, err.Error())
			return false
		default:
			w.Header().Set(ResourceHeader, printable.Escape(resource))
			http.Error(w, fmt.Sprintf("fencehttp: could not verify token %d for resource %q: %v", token, resource, err), http.StatusServiceUnavailable)
			return false
		}
	}
}

// verify asks Verify about token unless another request's check of resource is under way:
// then it waits for that one to end (or ctx) and returns ran false without asking, as the
// highest may have changed meanwhile.
func (g *Guard) verify(ctx context.Context, resource string, token int64) (ran bool, err error) {
	g.mu.Lock()
	if busy, ok := g.verifying[resource]; ok {
		g.mu.Unlock()
		select {
		case <-busy:
			return false, nil
		case <-ctx.Done():
			return false, fmt.Errorf("gave up waiting for another token's check: %w", context.Cause(ctx))
		}
	}
	if g.verifying == nil {
		g.verifying = map[string]chan struct{}{}
	}
	done := make(chan struct{})
	g.verifying[resource] = done
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.verifying, resource)
		g.mu.Unlock()
		close(done)
	}()
	return true, g.Verify(ctx, resource, token)
}

// refuse answers a request the guard refused for resource, with why (the Refused header,
// which the Transport reads back into a typed error), status and msg. The resource goes out
// escaped: net/http writes a header value's NUL and other control bytes as they are (only CR
// and LF become spaces), and a client's reader then drops the whole answer as malformed, so a
// request for "/a%00b" got no refusal it could read.
func refuse(w http.ResponseWriter, resource, why string, status int, msg string) {
	w.Header().Set(ResourceHeader, printable.Escape(resource))
	w.Header().Set(RefusedHeader, why)
	http.Error(w, msg, status)
}

// Check reports whether token would be admitted for resource now: nil, a
// *fence.StaleTokenError, a *TooManyResourcesError for a new resource the guard has no room
// for, or an error matching ErrInvalidGuard. It does not call Verify, records nothing, and
// waits while a handler of resource runs.
func (g *Guard) Check(resource string, token int64) error {
	st, err := g.peek(resource)
	if st == nil {
		return err
	}
	defer g.release(resource, st)
	st.lock()
	defer st.unlock()
	if st.seen && token < st.highest {
		return &fence.StaleTokenError{Resource: resource, Token: token, Highest: st.highest}
	}
	return nil
}

// Highest returns the highest token admitted for resource, and whether there was any.
func (g *Guard) Highest(resource string) (int64, bool) {
	st, _ := g.peek(resource)
	if st == nil {
		return 0, false
	}
	defer g.release(resource, st)
	st.lock()
	defer st.unlock()
	return st.highest, st.seen
}

// Resources returns how many resources the guard keeps an entry for (those with a recorded
// highest token, and those with a request in progress), to watch against MaxResources.
func (g *Guard) Resources() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.resources)
}

func (g *Guard) resourceOf(r *http.Request) string {
	if g.Resource != nil {
		return g.Resource(r)
	}
	return r.URL.Path
}

func (g *Guard) limit() (int, error) {
	switch {
	case g.MaxResources > 0:
		return g.MaxResources, nil
	case g.MaxResources < 0:
		return 0, fmt.Errorf("%w: MaxResources %d is negative (zero means DefaultMaxResources, %d)", ErrInvalidGuard, g.MaxResources, DefaultMaxResources)
	}
	return DefaultMaxResources, nil
}

// acquire returns resource's entry, made if need be, counting the caller in until release.
func (g *Guard) acquire(resource string) (*resourceState, error) {
	return g.entry(resource, true)
}

// release counts the caller out of st, dropping the entry if no token was ever admitted to it
// and nobody else holds or waits for it.
func (g *Guard) release(resource string, st *resourceState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	st.refs--
	if st.refs == 0 && !st.seen {
		delete(g.resources, resource)
	}
}

// peek returns resource's entry without making one, counting the caller in until release:
// nil and nil when a request would get one, nil and a *TooManyResourcesError when it would
// be refused.
func (g *Guard) peek(resource string) (*resourceState, error) {
	return g.entry(resource, false)
}

// entry returns resource's entry, counting the caller in until release; without one, it makes
// it if create is set and there is room, and otherwise returns nil and nil (room) or nil and a
// *TooManyResourcesError (none).
func (g *Guard) entry(resource string, create bool) (*resourceState, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n, err := g.limit()
	if err != nil {
		return nil, err
	}
	st := g.resources[resource]
	if st == nil {
		if len(g.resources) >= n {
			return nil, &TooManyResourcesError{Resource: resource, Limit: n}
		}
		if !create {
			return nil, nil
		}
		if g.resources == nil {
			g.resources = map[string]*resourceState{}
		}
		st = &resourceState{run: make(chan struct{}, 1)}
		g.resources[resource] = st
	}
	st.refs++
	return st, nil
}
