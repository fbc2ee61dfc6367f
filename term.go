package simba

import (
	"context"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/spi"
)

// Term is one tenure of one lease by this client: the lease name, its fencing token and its
// validity. A Term is valid while it has not been revoked and the session's local deadline has
// not passed (nor, until the first keep-alive after the grant confirms the lease, the
// deadline the grant itself gave); IsValid and Remaining read only atomics and the clock, so
// they are cheap enough to call before every fenced write. Pass Token to the resource you protect and have it reject
// tokens lower than the highest it has seen (package fence and its fencesql, fenceredis and
// fencehttp do).
//
// The zero Term is invalid. Terms are values; copies share state.
type Term struct{ s *termState }

// termState is shared by every copy of a Term. revoked is set once by the loop goroutine;
// deadline points at the session's published local deadline (nanoseconds on the client's
// clock), which every term of that session shares; until is the term's own bound by its
// grant (engine rule 6), math.MaxInt64 once a keep-alive has confirmed the lease.
//
// The term's context is made when Context is first called, not with the term: most terms of
// a Lock and Unlock are never asked for it, and context.WithCancelCause allocated twice per
// term, and its cause, a *RevokedError, once more at the revocation (TestLockCycleAllocations).
// mu guards ctx, cancel, ended and reason.
type termState struct {
	name     string
	token    int64
	owner    string
	clock    spi.Clock
	deadline *atomic.Int64
	until    atomic.Int64
	revoked  atomic.Bool
	mu       sync.Mutex
	ctx      context.Context         // nil until Context is called
	cancel   context.CancelCauseFunc // ctx's
	ended    bool                    // revoke has run
	reason   RevokeReason            // the first revocation's
}

func newTerm(name string, token int64, owner string, clock spi.Clock, deadline *atomic.Int64, until time.Duration) Term {
	t := Term{s: &termState{name: name, token: token, owner: owner, clock: clock, deadline: deadline}}
	t.s.until.Store(int64(until))
	return t
}

// confirm lifts the term's own bound: its deadline is the session's from now on.
func (t Term) confirm() {
	if t.s != nil {
		t.s.until.Store(math.MaxInt64)
	}
}

// revoke invalidates the term at once and cancels its context, if made, with a *RevokedError
// for reason as its cause (the first revocation's; a context made later gets the same). The
// error is built only for a context: an Unlock's revocation, whose term nobody asked for its
// context, builds none.
func (t Term) revoke(reason RevokeReason) {
	if t.s == nil {
		return
	}
	t.s.revoked.Store(true)
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.s.ended {
		return
	}
	t.s.ended, t.s.reason = true, reason
	if t.s.cancel != nil {
		t.s.cancel(t.s.revokedError())
	}
}

// revokedError is the cause of the term's context: s.mu held, s.ended.
func (s *termState) revokedError() error {
	return &RevokedError{Name: s.name, Token: s.token, Reason: s.reason}
}

// ended reports that the term has been revoked (its context cancelled, or to be when made).
func (t Term) ended() bool { return t.s == nil || t.s.revoked.Load() }

// Name is the lease name.
func (t Term) Name() string {
	if t.s == nil {
		return ""
	}
	return t.s.name
}

// Token is the fencing token: strictly increasing per name across all holders.
func (t Term) Token() int64 {
	if t.s == nil {
		return 0
	}
	return t.s.token
}

// Owner is the owner string of the session holding the term (this client's).
func (t Term) Owner() string {
	if t.s == nil {
		return ""
	}
	return t.s.owner
}

// IsValid reports whether the term is still held: not revoked and before the session's local
// deadline.
func (t Term) IsValid() bool { return t.Remaining() > 0 }

// Remaining is how long the term stays valid without a further keep-alive; 0 once invalid.
func (t Term) Remaining() time.Duration {
	if t.s == nil || t.s.revoked.Load() {
		return 0
	}
	left := time.Duration(min(t.s.deadline.Load(), t.s.until.Load())) - t.s.clock.Now()
	if left < 0 {
		return 0
	}
	return left
}

// Context is cancelled when the term is revoked; context.Cause tells why (a *RevokedError).
func (t Term) Context() context.Context {
	if t.s == nil {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.s.ctx == nil {
		t.s.ctx, t.s.cancel = context.WithCancelCause(context.Background())
		if t.s.ended {
			t.s.cancel(t.s.revokedError())
		}
	}
	return t.s.ctx
}

// String renders the term for logs: "name#token".
func (t Term) String() string {
	if t.s == nil {
		return "<no term>"
	}
	return t.s.name + "#" + strconv.FormatInt(t.s.token, 10)
}
