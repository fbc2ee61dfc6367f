// Package simbahttp serves a Simba client's health and status over HTTP: a health check for
// load balancers and orchestrators, a JSON status for tools, and a small page for people.
//
// A Handler follows one client through a listener and a call observer (Options, applied once
// however many times they are passed), so it needs nothing from the client's hot paths; Attach tells it the client (for its owner string), and Track adds the
// live view of elections and groups (time left of their terms, the holder they last learned).
// When Opts.Backend implements spi.Inspector, the status and the page show the backend's view as
// well — every held lease with its holder and token, every live session, every group with live
// members:
//
//	h := simbahttp.New(simbahttp.Opts{Backend: backend})
//	c, err := simba.New(backend, append(h.Options(), simba.WithOwner("node-a"))...)
//	h.Attach(c)
//	e, err := c.NewElection("leader")
//	h.Track(e)
//	http.Handle("/simba/", http.StripPrefix("/simba", h))
//
// Routes (relative to where the handler is mounted):
//
//	GET /livez     200 until the client is closed, whatever the backend does: "ok: session
//	               …", or "ok: alive; no live session: …" with the reason; 503 "client closed"
//	               after Close. The Kubernetes livenessProbe: a restart does not bring a backend
//	               back, so a probe that failed in a backend outage would restart every pod at
//	               once for nothing.
//	GET /healthz   200 while the client's session is live: "ok: session …", or, while its
//	               keep-alives fail, "degraded: keep-alives failing since <first failure, UTC>
//	               (n failed), session … has <time left> left; last error: …"; 503
//	               "unavailable: …" without a live session (no session yet, session lost and
//	               why, client closed; with the last backend error). Not a livenessProbe (it
//	               fails in a backend outage once the session is lost).
//	GET /readyz    200 "ok: session …" only while the session is live and its last keep-alive
//	               succeeded; 503 with /healthz's "degraded: …" line while keep-alives fail, and
//	               with its "unavailable: …" line without a live session. A load balancer's,
//	               readinessProbe's or on-call page's check: it turns 503 at the first failed
//	               keep-alive (a renewal interval, TTL/3 by default, into a backend outage),
//	               where /healthz turns 503 only when the session is lost, up to a TTL later,
//	               and it turns 200 again at the first keep-alive that succeeds.
//	               In a backend outage it is 503 on every instance: as a readinessProbe it
//	               takes them all out of a Service, right for traffic that needs Simba (a
//	               leader-only endpoint), wrong for a service that works without it.
//	GET /status    JSON (Status): session, terms held with token and time left, known
//	               holders, groups with members and partitions, the timeline of terms per
//	               name, and the backend's Inspector snapshot of live state when the backend
//	               has one (BackendSnapshot; ?free=1 adds the free lease records, see
//	               Status.Backend; a record the backend cannot read is never free: it is
//	               listed with its reason, BackendLease.Unreadable, and the page shows
//	               "unreadable record: <why>")
//	GET /          an HTML page that refreshes itself: the state (live, degraded with
//	               /healthz's line, unavailable), holders, a timeline of terms per name
//	               (who held what, when, with which token), members and partitions; owners,
//	               names, session ids and errors shown with control and format characters
//	               (bidirectional overrides, zero-width ones) escaped as in simba status
//	               (\u202e), where /status gives them as they are
//
// The JSON speaks one dialect, the backend's snapshot included: snake_case keys, a holder as
// "session" and "owner", and times left in milliseconds ("remaining_ms", -1 where the backend
// cannot tell), so a tool reads every part of it alike.
//
// A response's size follows what is live, not the backend's history. SQL rows and Redis hashes
// of leases outlive their terms (they keep the last token), so a backend that has served many
// names, per-entity locks say, keeps a free lease record per name ever used; the status lists
// the held leases and only counts the free ones (Status.FreeLeases). An Inspect still reads
// every record, so one serves every request for Opts.SnapshotTTL (default half of
// Opts.Refresh, at most 1 s), and concurrent requests share one in flight: any number of
// viewers cost the backend at most one Inspect begun per SnapshotTTL, and a response never
// shows a snapshot whose Inspect began more than SnapshotTTL before the request
// (Status.BackendAt says when it began). The timeline keeps at most Opts.TimelineNames names
// (default 20): those with a current term, then the most recently ended, each for
// Opts.TimelineRetain after its last term ended (default 10 min).
//
// The timeline records this client's own terms from its events, and other holders as the
// handler observes them (through the backend's Inspector, or, when there is no snapshot,
// tracked elections) each time the status or the page is requested: a term of another client
// that began and ended between two snapshots does not show.
package simbahttp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// Opts configures a Handler. The zero value is ready to use.
type Opts struct {
	// Backend is the client's backend; when it implements spi.Inspector, the status and the page
	// show its snapshot and the timeline follows every holder. Nil leaves the backend's view out.
	Backend spi.Backend
	// Title heads the page (default "Simba").
	Title string
	// Refresh is how often the page reloads itself (default 2 s).
	Refresh time.Duration
	// History is how many terms the timeline keeps per name (default 20).
	History int
	// TimelineNames is how many names the timeline keeps (default 20): names with a current
	// term first — a name first seen held while TimelineNames names have a current term is left
	// out of the timeline (not out of Status.Holders) — then the most recently ended, a new name
	// taking the place of the one whose last term ended longest ago.
	TimelineNames int
	// TimelineRetain is how long the timeline keeps a name after its last term ended (default
	// 10 min, the span the page's timeline covers).
	TimelineRetain time.Duration
	// SnapshotTTL is how long one backend snapshot serves requests (default half of Refresh, at
	// most 1 s; negative: each request inspects): a request reuses the snapshot of an Inspect
	// begun at most SnapshotTTL before it, or waits for such an Inspect in flight, and
	// otherwise begins one.
	SnapshotTTL time.Duration
	// InspectTimeout bounds the backend's Inspect (default 2 s).
	InspectTimeout time.Duration
	// Now is the wall clock the handler stamps events with (default time.Now).
	Now func() time.Time
}

// Handler is an http.Handler with the routes /healthz, /status and /. It is safe for
// concurrent use.
type Handler struct {
	o         Opts
	inspector spi.Inspector
	mux       *http.ServeMux

	mu      sync.Mutex
	client  *simba.Client
	session simba.SessionID
	live    bool
	closed  bool
	since   time.Time // of the session state
	lost    string    // why the last session ended
	lastErr *BackendError
	// The live session's failing keep-alives: how many in a row (0 while the last succeeded),
	// since when, and the last one's error.
	kaFails   int
	kaSince   time.Time
	kaErr     string
	held      map[string]heldTerm
	groups    map[string]groupView
	timeline  map[string][]*Entry
	elections map[string]*simba.Election
	pgroups   map[string]*simba.PartitionGroup
	folded    uint64 // the seq of the latest snapshot folded into the timeline

	smu    sync.Mutex
	seq    uint64
	latest *inspection // the latest Inspect begun
}

// inspection is one Inspect of the backend, shared by the requests that use it.
type inspection struct {
	seq   uint64
	begun time.Time // by the monotonic clock, for its age
	at    time.Time // by Opts.Now, for Status.BackendAt
	done  chan struct{}
	snap  spi.Snapshot // set before done closes
	err   error
}

type heldTerm struct {
	token int64
	since time.Time
	term  simba.Term // the granted term (Event.Term): its time left, for a Lock's too
}

// remainingMillis is the term's time left in milliseconds, -1 for an event without its term.
func (t heldTerm) remainingMillis() int64 {
	return remainingMillis(t.term.Remaining(), t.term == (simba.Term{}))
}

type groupView struct {
	members    []simba.SessionID
	partitions []int
	at         time.Time
}

// New returns a handler; pass its Options to simba.New.
func New(o Opts) *Handler {
	if o.Title == "" {
		o.Title = "Simba"
	}
	if o.Refresh <= 0 {
		o.Refresh = 2 * time.Second
	}
	if o.History <= 0 {
		o.History = 20
	}
	if o.TimelineNames <= 0 {
		o.TimelineNames = 20
	}
	if o.TimelineRetain <= 0 {
		o.TimelineRetain = timelineWindow
	}
	if o.SnapshotTTL == 0 {
		o.SnapshotTTL = min(o.Refresh/2, time.Second)
	}
	if o.InspectTimeout <= 0 {
		o.InspectTimeout = 2 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	h := &Handler{
		o:         o,
		held:      make(map[string]heldTerm),
		groups:    make(map[string]groupView),
		timeline:  make(map[string][]*Entry),
		elections: make(map[string]*simba.Election),
		pgroups:   make(map[string]*simba.PartitionGroup),
		since:     o.Now(),
	}
	h.inspector, _ = o.Backend.(spi.Inspector)
	h.mux = http.NewServeMux()
	h.mux.HandleFunc("GET /healthz", h.serveHealth)
	h.mux.HandleFunc("GET /readyz", h.serveReady)
	h.mux.HandleFunc("GET /livez", h.serveLive)
	h.mux.HandleFunc("GET /status", h.serveStatus)
	h.mux.HandleFunc("GET /{$}", h.servePage)
	return h
}

// Options are the client options that feed the handler: a listener (the session, terms,
// groups, errors) and a call observer (whether keep-alives succeed, which no event says). Pass
// them to simba.New; a Handler follows one client. They are applied once per client however
// many times they are passed (simba.Once), so that passed twice they count each failed
// keep-alive once.
func (h *Handler) Options() []simba.Option {
	return []simba.Option{simba.Once(onceKey{h}, simba.WithListener(h.listen), simba.WithCallObserver(h.observe))}
}

// onceKey is the simba.Once key of a Handler's options: of a type no other package can make.
type onceKey struct{ h *Handler }

// observe runs on a backend call's goroutine: it follows the keep-alives' outcomes, which tell
// a backend outage as soon as the first keep-alive fails, up to a TTL before the session is
// lost. A keep-alive a close ended or its caller abandoned says nothing of the backend.
func (h *Handler) observe(ci simba.CallInfo) {
	if ci.Op != simba.OpKeepAlive || ci.Abandoned || ci.Closing {
		return
	}
	now := h.o.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if ci.Err == nil {
		h.kaFails, h.kaErr = 0, ""
		return
	}
	if h.kaFails == 0 {
		h.kaSince = now
	}
	h.kaFails++
	h.kaErr = ci.Err.Error()
}

// Attach tells the handler its client, whose owner string the status and page then show.
func (h *Handler) Attach(c *simba.Client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.client = c
}

// Track adds an election's or group's live view: the time left of its terms and, for an
// election, the holder it last learned. It accepts *simba.Election and *simba.PartitionGroup
// (other values are ignored); a later Track of the same name replaces the earlier one.
func (h *Handler) Track(x interface{ Name() string }) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch v := x.(type) {
	case *simba.Election:
		h.elections[v.Name()] = v
	case *simba.PartitionGroup:
		h.pgroups[v.Name()] = v
	}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// listen runs on the client's loop goroutine: it only records.
func (h *Handler) listen(ev simba.Event) {
	now := h.o.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	switch ev.Kind {
	case simba.EventSessionOpened:
		h.session, h.live, h.since, h.lost, h.lastErr = ev.Session, true, now, "", nil
		h.kaFails, h.kaErr = 0, ""
	case simba.EventSessionExpired:
		h.live, h.since = false, now
		h.kaFails, h.kaErr = 0, "" // the session's loss says it from here on
		h.lost = fmt.Sprintf("session %s lost (%v)", ev.Session, ev.Reason)
		if ev.Paused > 0 { // the likely cause: the process did not run (simba.EventPaused)
			h.lost += fmt.Sprintf(" after the process paused for %v", ev.Paused.Round(time.Millisecond))
		}
	case simba.EventClosed:
		h.live, h.closed, h.since = false, true, now
		h.kaFails, h.kaErr = 0, ""
	case simba.EventElected:
		h.held[ev.Name] = heldTerm{token: ev.Token, since: now, term: ev.Term}
		owner := ""
		if h.client != nil {
			owner = h.client.Owner()
		}
		h.observeLocked(ev.Name, ev.Session, owner, ev.Token, true, now)
	case simba.EventRevoked:
		if t, ok := h.held[ev.Name]; ok && t.token == ev.Token {
			delete(h.held, ev.Name)
		}
		for _, e := range h.timeline[ev.Name] {
			if e.Token == ev.Token && e.Self && e.Until == nil {
				e.Until, e.Reason = &now, ev.Reason.String()
			}
		}
	case simba.EventMembers:
		h.groups[ev.Name] = groupView{members: slices.Clone(ev.Members), partitions: slices.Clone(ev.Partitions), at: now}
	case simba.EventBackendError:
		h.lastErr = &BackendError{Op: ev.Op, Name: ev.Name, Class: ev.Class.String(), Error: ev.Err.Error(), At: now}
	}
}

// observeLocked records that session (owner) holds name with token (0: unknown) as of now:
// a new timeline entry unless the latest one already says so; an open entry of another
// holder ends. A sighting without a token (a tracked election's) is no news when the latest
// entry is that session's, open or ended: it may be older than what ended the entry.
func (h *Handler) observeLocked(name string, session simba.SessionID, owner string, token int64, self bool, now time.Time) {
	entries := h.timeline[name]
	for _, e := range entries {
		if (token != 0 && e.Token == token) || (token == 0 && e.Session == session && e.Until == nil) {
			if e.Owner == "" {
				e.Owner = owner
			}
			return
		}
	}
	if n := len(entries); n > 0 {
		last := entries[n-1]
		if last.Session == session && last.Token == 0 && last.Until == nil {
			last.Token = token // the holder's token learned
			return
		}
		if token == 0 && last.Session == session {
			return
		}
	}
	if entries == nil && !h.admitLocked(now) {
		return
	}
	h.endOpenLocked(name, session, now)
	e := &Entry{Name: name, Token: token, Session: session, Owner: owner, Self: self, Since: now}
	entries = append(entries, e)
	if len(entries) > h.o.History {
		entries = entries[len(entries)-h.o.History:]
	}
	h.timeline[name] = entries
}

// lastEnd returns when the last of entries ended, and whether one is current.
func lastEnd(entries []*Entry) (end time.Time, current bool) {
	for _, e := range entries {
		if e.Until == nil {
			current = true
		} else if e.Until.After(end) {
			end = *e.Until
		}
	}
	return end, current
}

// expireLocked drops the names of the timeline whose last term ended more than
// Opts.TimelineRetain before now.
func (h *Handler) expireLocked(now time.Time) {
	for name, entries := range h.timeline {
		if end, current := lastEnd(entries); !current && now.Sub(end) > h.o.TimelineRetain {
			delete(h.timeline, name)
		}
	}
}

// admitLocked reports whether the timeline may take a new name as of now: after expiring, with
// Opts.TimelineNames names left, the one whose last term ended longest ago makes room, and
// none does when every name has a current term.
func (h *Handler) admitLocked(now time.Time) bool {
	h.expireLocked(now)
	if len(h.timeline) < h.o.TimelineNames {
		return true
	}
	oldest, at := "", time.Time{}
	for name, entries := range h.timeline {
		end, current := lastEnd(entries)
		if !current && (oldest == "" || end.Before(at) || (end.Equal(at) && name < oldest)) {
			oldest, at = name, end
		}
	}
	if oldest == "" {
		return false
	}
	delete(h.timeline, oldest)
	return true
}

// endOpenLocked ends the open timeline entries of other clients for name whose holder is not
// session (all when session is empty): another holder, or none, was observed. This client's
// own terms end only by its own events (a snapshot read before one of them may be stale).
func (h *Handler) endOpenLocked(name string, session simba.SessionID, now time.Time) {
	for _, e := range h.timeline[name] {
		if e.Until == nil && !e.Self && e.Session != session {
			e.Until = &now
			if e.Reason == "" && session == "" {
				e.Reason = "seen-free"
			} else if e.Reason == "" {
				e.Reason = "seen-replaced"
			}
		}
	}
}

// BackendError is the last backend error the client reported (Status.LastError).
type BackendError struct {
	// Op is the failed operation (a simba.Op constant, see simba.Event.Op), Name the lease or
	// group it concerned.
	Op   string `json:"op"`
	Name string `json:"name,omitempty"`
	// Class is "retryable" or "permanent"; Error the error's text; At when it was reported.
	Class string    `json:"class"`
	Error string    `json:"error"`
	At    time.Time `json:"at"`
}

// Entry is one term in the timeline of a name.
type Entry struct {
	// Name is the lease; Token the term's fencing token (0 when the holder was seen without
	// it); Session and Owner the holder.
	Name    string          `json:"name"`
	Token   int64           `json:"token"`
	Session simba.SessionID `json:"session"`
	Owner   string          `json:"owner"`
	// Self reports a term of this client.
	Self bool `json:"self"`
	// Since is when the term began (this client's) or was first seen (another's).
	Since time.Time `json:"since"`
	// Until is when the term ended or was last seen ended (nil while current).
	Until *time.Time `json:"until,omitempty"`
	// Reason says why this client's term ended (a simba.RevokeReason), or, for another's, how
	// it was seen to end: "seen-replaced" (another holder) or "seen-free".
	Reason string `json:"reason,omitempty"`
}

// Session is the client's session in a Status.
type Session struct {
	// ID is the live session's id (empty when none is live); Owner the client's owner string
	// (empty until Attach); Live whether the session is live.
	ID    simba.SessionID `json:"id,omitempty"`
	Owner string          `json:"owner,omitempty"`
	Live  bool            `json:"live"`
	// Since is when the session opened (live) or was lost.
	Since time.Time `json:"since"`
	// Reason says why there is no live session (empty while live).
	Reason string `json:"reason,omitempty"`
}

// HeldTerm is a term this client holds.
type HeldTerm struct {
	// Name is the lease, Token the term's fencing token, Since when it was granted.
	Name  string    `json:"name"`
	Token int64     `json:"token"`
	Since time.Time `json:"since"`
	// RemainingMillis is the term's time left by the client's clock (an election's, a
	// group's partition's or a Lock's); -1 when unknown.
	RemainingMillis int64 `json:"remaining_ms"`
}

// Holder is the holder of a lease as known to this client or its backend.
type Holder struct {
	// Name is the lease; Session and Owner its holder; Token the holder's fencing token (0 when
	// unknown).
	Name    string          `json:"name"`
	Session simba.SessionID `json:"session"`
	Owner   string          `json:"owner"`
	Token   int64           `json:"token"`
	// RemainingMillis is the holder's time left by the backend's clock; -1 when unknown.
	RemainingMillis int64 `json:"remaining_ms"`
	// Self reports that this client is the holder.
	Self bool `json:"self"`
	// Unreadable says why the backend could not read the lease's record (BackendLease's
	// Unreadable); the page shows "unreadable record: <why>" as its time left.
	Unreadable string `json:"unreadable,omitempty"`
	// Source is where the holder is known from: "backend" (Inspector), "client" (a running
	// tracked election's last-learned holder, shown only when there is no backend snapshot) or
	// "self" (this client's own term, shown where no snapshot lists the name's holder and none
	// began after the term was granted: a snapshot that began later and shows the name free
	// says the lease is gone at the backend).
	Source string `json:"source"`
}

// Group is a partition group this client is in.
type Group struct {
	// Name is the group; Members its live members as this client last learned them.
	Name    string            `json:"name"`
	Members []simba.SessionID `json:"members"`
	// Partitions are the partitions assigned to this client; Count is the group's partition
	// count (0 when the group is not tracked).
	Partitions []int `json:"partitions"`
	Count      int   `json:"count,omitempty"`
}

// BackendSnapshot is the backend's snapshot of live state in a Status (Status.Backend): its
// spi.Snapshot in the status's own terms, with the keys named as elsewhere in the status and
// the times left in milliseconds, so that one document speaks one dialect.
type BackendSnapshot struct {
	// Leases are the held leases, sorted by name (with ?free=1 the free lease records too).
	Leases []BackendLease `json:"leases"`
	// Sessions are the live sessions, sorted by id.
	Sessions []BackendSession `json:"sessions"`
	// Groups are the groups with live members, sorted by name.
	Groups []BackendGroup `json:"groups"`
}

// BackendLease is a lease record in a BackendSnapshot (an spi.LeaseInfo).
type BackendLease struct {
	// Name is the lease; Session and Owner its holder (empty when the lease is free).
	Name    string          `json:"name"`
	Session simba.SessionID `json:"session"`
	Owner   string          `json:"owner"`
	// Token is the token of the current tenure, or of the latest one when the lease is free
	// (0 where the backend keeps no record of free leases, as on ZooKeeper).
	Token int64 `json:"token"`
	// RemainingMillis is the holder's time left by the backend's clock; 0 when the lease is
	// free, -1 when the backend cannot tell (ZooKeeper, for another client's session:
	// spi.LeaseInfo.RemainingUnknown).
	RemainingMillis int64 `json:"remaining_ms"`
	// Unreadable says why the backend could not read the lease's record (a forged or damaged
	// one: spi.LeaseInfo.Unreadable); absent for a sound record. Such a lease is never free,
	// whatever Session says, and its RemainingMillis is -1.
	Unreadable string `json:"unreadable,omitempty"`
}

// BackendSession is a live session in a BackendSnapshot (an spi.SessionInfo).
type BackendSession struct {
	// ID is the session's id; Owner the owner string it was opened with.
	ID    simba.SessionID `json:"id"`
	Owner string          `json:"owner"`
	// RemainingMillis is the session's time left by the backend's clock; -1 when the backend
	// cannot tell (spi.SessionInfo.RemainingUnknown) or the record is unreadable.
	RemainingMillis int64 `json:"remaining_ms"`
	// Unreadable says why the backend could not read the session's record (a forged one, such
	// as an expiry beyond any session TTL: spi.SessionInfo.Unreadable); absent for a sound
	// record. The page shows "unreadable record: <why>" as its time left.
	Unreadable string `json:"unreadable,omitempty"`
}

// BackendGroup is a group with live members in a BackendSnapshot.
type BackendGroup struct {
	// Name is the group; Members its live members, sorted ascending.
	Name    string            `json:"name"`
	Members []simba.SessionID `json:"members"`
}

// Degraded describes a live session whose keep-alives fail (Status.Degraded): the backend is
// unreachable or failing, and the session, with every term it backs, is lost when its time
// left runs out unless a keep-alive succeeds first.
type Degraded struct {
	// Since is when the first keep-alive of the run of failures failed; Failures how many
	// have failed in a row.
	Since    time.Time `json:"since"`
	Failures int       `json:"failures"`
	// SessionRemainingMillis is the session's time left by the client's clock
	// (simba.Client.SessionRemaining); -1 before Attach.
	SessionRemainingMillis int64 `json:"session_remaining_ms"`
	// LastError is the last failed keep-alive's error.
	LastError string `json:"last_error"`
	// Summary is the line /healthz and /readyz answer: "degraded: keep-alives failing since
	// … (n failed), session … has … left; last error: …".
	Summary string `json:"summary"`
}

// Status is the body of /status.
type Status struct {
	// Healthy is what /healthz answers (the session is live: 200), Ready what /readyz answers
	// (live and its keep-alives succeeding: 200).
	Healthy bool `json:"healthy"`
	Ready   bool `json:"ready"`
	// Degraded is set while the session is live but its keep-alives fail (nil otherwise).
	Degraded *Degraded `json:"degraded,omitempty"`
	// Session is the client's session: live or not, and why not.
	Session Session `json:"session"`
	// Terms are the terms this client holds; Holders every holder known, by name.
	Terms   []HeldTerm `json:"terms"`
	Holders []Holder   `json:"holders"`
	// Groups are the partition groups this client is in.
	Groups []Group `json:"groups"`
	// Timeline lists the terms seen per name, oldest first (at most Opts.History each), for
	// at most Opts.TimelineNames names (see there and Opts.TimelineRetain).
	Timeline map[string][]*Entry `json:"timeline"`
	// LastError is the last backend error since the session opened.
	LastError *BackendError `json:"last_error,omitempty"`
	// Backend is the backend's snapshot of live state: the held leases, the live sessions and
	// the groups with live members (nil when the backend has no Inspector or Inspect failed:
	// BackendError says why). Free lease records are left out and counted in FreeLeases: SQL
	// rows and Redis hashes of leases outlive their terms to keep the last token, so a backend
	// keeps one per name ever used, and listing them made the status grow without bound with
	// the backend's history. GET /status?free=1 lists them as well (its size then grows so).
	Backend *BackendSnapshot `json:"backend,omitempty"`
	// FreeLeases is how many of the snapshot's leases are free (left out of Backend.Leases
	// unless ?free=1).
	FreeLeases int `json:"free_leases"`
	// BackendAt is when the Inspect that took Backend began: at most Opts.SnapshotTTL before
	// the request, as one snapshot serves the requests of that long.
	BackendAt time.Time `json:"backend_at,omitzero"`
	// BackendError is why Backend is nil although the backend has an Inspector: the Inspect
	// failed or timed out (Opts.InspectTimeout).
	BackendError string `json:"backend_error,omitempty"`
	// At is when the status was taken.
	At time.Time `json:"at"`
}

// health returns whether the session is live and, if not, why.
func (h *Handler) healthLocked() (bool, string) {
	switch {
	case h.live:
		return true, ""
	case h.closed:
		return false, "client closed"
	}
	reason := "no session yet"
	if h.lost != "" {
		reason = h.lost + "; no new session yet"
	}
	if h.lastErr != nil {
		reason += "; last backend error: " + h.lastErr.Error
	}
	return false, reason
}

// health is the state the probes answer from.
type health struct {
	live     bool
	closed   bool
	reason   string // why not live
	session  simba.SessionID
	degraded *Degraded // live, with failing keep-alives
}

// health reads the session's state, and, while keep-alives fail, the session's time left from
// the client (outside h.mu: the client's lock is never taken under the handler's, since the
// client's loop calls the listener, which takes h.mu).
func (h *Handler) health() health {
	h.mu.Lock()
	live, reason := h.healthLocked()
	hs := health{live: live, closed: h.closed, reason: reason, session: h.session}
	client := h.client
	var d *Degraded
	if live && h.kaFails > 0 {
		d = &Degraded{Since: h.kaSince, Failures: h.kaFails, LastError: h.kaErr, SessionRemainingMillis: -1}
	}
	h.mu.Unlock()
	if d != nil {
		left := "an unknown time (no Attach)"
		if client != nil {
			rem := client.SessionRemaining()
			d.SessionRemainingMillis = rem.Milliseconds()
			left = rem.Round(time.Millisecond).String()
		}
		d.Summary = fmt.Sprintf("degraded: keep-alives failing since %s (%d failed), session %s has %s left; last error: %s",
			d.Since.UTC().Format("2006-01-02T15:04:05.000Z"), d.Failures, hs.session, left, d.LastError)
		hs.degraded = d
	}
	return hs
}

func plain(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprintln(w, body)
}

// serveHealth answers 200 while the session is live, degraded or not (the body says which),
// and 503 without a live session.
func (h *Handler) serveHealth(w http.ResponseWriter, r *http.Request) {
	h.serveSession(w, http.StatusOK)
}

// serveReady answers 200 only while the session is live and its keep-alives succeed.
func (h *Handler) serveReady(w http.ResponseWriter, r *http.Request) {
	h.serveSession(w, http.StatusServiceUnavailable)
}

// serveSession answers /healthz and /readyz, which differ only in the code of a live session
// whose keep-alives fail: 200 ok, 503 unavailable without a live session, and degraded's.
func (h *Handler) serveSession(w http.ResponseWriter, degraded int) {
	hs := h.health()
	switch {
	case hs.degraded != nil:
		plain(w, degraded, hs.degraded.Summary)
	case hs.live:
		plain(w, http.StatusOK, fmt.Sprintf("ok: session %s", hs.session))
	default:
		plain(w, http.StatusServiceUnavailable, "unavailable: "+hs.reason)
	}
}

// serveLive answers 200 until the client is closed, whatever the backend does.
func (h *Handler) serveLive(w http.ResponseWriter, r *http.Request) {
	hs := h.health()
	if hs.closed {
		plain(w, http.StatusServiceUnavailable, "unavailable: client closed")
		return
	}
	if hs.live {
		plain(w, http.StatusOK, fmt.Sprintf("ok: session %s", hs.session))
		return
	}
	plain(w, http.StatusOK, "ok: alive; no live session: "+hs.reason)
}

func (h *Handler) serveStatus(w http.ResponseWriter, r *http.Request) {
	st := h.status(r.Context(), r.URL.Query().Get("free") == "1")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(st)
}

// inspect returns an Inspect of the backend begun at most Opts.SnapshotTTL ago, waiting for
// one in flight or beginning one (with Opts.InspectTimeout) when there is none that recent. The
// Inspect runs apart from ctx, which only bounds the wait: a request that gives up does not
// fail the others that share it.
func (h *Handler) inspect(ctx context.Context) (*inspection, error) {
	h.smu.Lock()
	c := h.latest
	if c == nil || time.Since(c.begun) > h.o.SnapshotTTL {
		h.seq++
		c = &inspection{seq: h.seq, begun: time.Now(), at: h.o.Now(), done: make(chan struct{})}
		h.latest = c
		go func() {
			defer close(c.done)
			ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.o.InspectTimeout)
			defer cancel()
			c.snap, c.err = h.inspector.Inspect(ictx)
		}()
	}
	h.smu.Unlock()
	select {
	case <-c.done:
		return c, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// remainingMillis is d in whole milliseconds, or -1 when unknown: how the status gives a time
// left.
func remainingMillis(d time.Duration, unknown bool) int64 {
	if unknown {
		return -1
	}
	return max(d.Milliseconds(), 0)
}

// live converts snap to the status's BackendSnapshot, with the held leases only unless free,
// and returns how many of snap's leases were free.
func live(snap *spi.Snapshot, free bool) (BackendSnapshot, int) {
	out := BackendSnapshot{Leases: []BackendLease{}, Sessions: make([]BackendSession, 0, len(snap.Sessions)),
		Groups: make([]BackendGroup, 0, len(snap.Groups))}
	n := 0
	for _, l := range snap.Leases {
		unreadable := l.Unreadable != ""
		if l.Holder == "" && !unreadable {
			n++
			if !free {
				continue
			}
		}
		out.Leases = append(out.Leases, BackendLease{Name: l.Name, Session: l.Holder, Owner: l.Owner, Token: l.Token,
			RemainingMillis: remainingMillis(l.Remaining, (l.RemainingUnknown && l.Holder != "") || unreadable),
			Unreadable:      l.Unreadable})
	}
	for _, s := range snap.Sessions {
		out.Sessions = append(out.Sessions, BackendSession{ID: s.ID, Owner: s.Owner,
			RemainingMillis: remainingMillis(s.Remaining, s.RemainingUnknown || s.Unreadable != ""), Unreadable: s.Unreadable})
	}
	for g, members := range snap.Groups {
		out.Groups = append(out.Groups, BackendGroup{Name: g, Members: slices.Clone(members)})
	}
	sort.Slice(out.Groups, func(i, j int) bool { return out.Groups[i].Name < out.Groups[j].Name })
	return out, n
}

// Status returns the status that /status serves: from the backend's snapshot (an Inspect
// begun at most Opts.SnapshotTTL ago, see there), of live state (Status.Backend), folding the
// holders it shows into the timeline.
func (h *Handler) Status(ctx context.Context) Status { return h.status(ctx, false) }

// status is Status, with the free lease records listed when free is set.
func (h *Handler) status(ctx context.Context, free bool) Status {
	var snap *BackendSnapshot
	var snapErr string
	var snapAt time.Time
	var seq uint64
	var nfree int
	if h.inspector != nil {
		c, err := h.inspect(ctx)
		if err != nil {
			snapErr = err.Error()
		} else {
			s, n := live(&c.snap, free)
			snap, nfree, snapAt, seq = &s, n, c.at, c.seq
		}
	}
	hs := h.health()
	now := h.o.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	st := Status{Degraded: hs.degraded, Backend: snap, FreeLeases: nfree, BackendAt: snapAt, BackendError: snapErr, At: now,
		LastError: h.lastErr, Terms: []HeldTerm{}, Holders: []Holder{}, Groups: []Group{}}
	st.Healthy, st.Session.Reason = h.healthLocked()
	if !st.Healthy { // the session was lost since health read it
		st.Degraded = nil
	}
	st.Ready = st.Healthy && st.Degraded == nil
	st.Session.ID, st.Session.Live, st.Session.Since = h.session, h.live, h.since
	if !h.live {
		st.Session.ID = ""
	}
	if h.client != nil {
		st.Session.Owner = h.client.Owner()
	}

	// Terms held, with their time left: the term its grant's event carried, the very term an
	// election, a group's partition or a Lock holds.
	for name, t := range h.held {
		st.Terms = append(st.Terms, HeldTerm{Name: name, Token: t.token, Since: t.since, RemainingMillis: t.remainingMillis()})
	}
	sort.Slice(st.Terms, func(i, j int) bool { return st.Terms[i].Name < st.Terms[j].Name })

	// Holders: the backend's view first, then what tracked elections learned, then our own
	// terms the snapshot cannot know of (granted after it began).
	// A snapshot is folded into the timeline once, and only when it is newer than the one
	// folded last (a request may use an older one still within SnapshotTTL).
	holders := make(map[string]Holder)
	h.expireLocked(now)
	if snap != nil {
		fold := seq > h.folded
		if fold {
			h.folded = seq
		}
		held := make(map[string]bool)
		for _, l := range snap.Leases {
			if l.Session == "" && l.Unreadable == "" {
				continue
			}
			held[l.Name] = true
			self := h.live && l.Session == h.session
			holders[l.Name] = Holder{Name: l.Name, Session: l.Session, Owner: l.Owner, Token: l.Token,
				RemainingMillis: l.RemainingMillis, Self: self, Source: "backend", Unreadable: l.Unreadable}
			if fold && l.Session != "" {
				h.observeLocked(l.Name, l.Session, l.Owner, l.Token, self, now)
			}
		}
		for name := range h.timeline {
			if fold && !held[name] {
				h.endOpenLocked(name, "", now)
			}
		}
	}
	// A tracked election's holder is only what it last learned, older than a snapshot just
	// read: it stands in for the backend's view only when there is none (a name the snapshot
	// does not list is free).
	for name, e := range h.elections {
		if snap != nil {
			break
		}
		if l, ok := e.Leader(); ok && !l.Self {
			holders[name] = Holder{Name: name, Session: l.Session, Owner: l.Owner, RemainingMillis: -1, Source: "client"}
			h.observeLocked(name, l.Session, l.Owner, 0, false, now)
		}
	}
	for name, t := range h.held {
		if _, ok := holders[name]; ok {
			continue
		}
		if snap != nil && snapAt.After(t.since) {
			// The snapshot began after this client saw its grant and shows the name free: the
			// lease is gone at the backend (released ahead of the revoke event, or its record
			// lost). The term stays in Terms, this client's own view.
			continue
		}
		holders[name] = Holder{Name: name, Session: h.session, Owner: st.Session.Owner, Token: t.token,
			RemainingMillis: t.remainingMillis(), Self: true, Source: "self"}
	}
	for _, hd := range holders {
		st.Holders = append(st.Holders, hd)
	}
	sort.Slice(st.Holders, func(i, j int) bool { return st.Holders[i].Name < st.Holders[j].Name })

	for name, g := range h.groups {
		gr := Group{Name: name, Members: slices.Clone(g.members), Partitions: slices.Clone(g.partitions)}
		if pg := h.pgroups[name]; pg != nil {
			gr.Count = pg.Partitions()
		}
		st.Groups = append(st.Groups, gr)
	}
	sort.Slice(st.Groups, func(i, j int) bool { return st.Groups[i].Name < st.Groups[j].Name })

	st.Timeline = make(map[string][]*Entry, len(h.timeline))
	for name, entries := range h.timeline {
		out := make([]*Entry, len(entries))
		for i, e := range entries {
			c := *e
			out[i] = &c
		}
		st.Timeline[name] = out
	}
	return st
}
