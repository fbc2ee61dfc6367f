package tck

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// closedGrace is how long past a call's own context the suites wait for a call on a closed
// backend to return before they report it hung (a call that ignores its context).
const closedGrace = 5 * time.Second

// closedCall is one call made on a closed backend: run makes it and returns its error.
type closedCall struct {
	name string
	run  func(ctx context.Context) error
}

// closedCalls lists a call of every method of b: the SPI's and those of the optional
// interfaces b implements, on the session s, the lease name (s holds it with token tok) and the
// group group (s is a member) that b opened before it was closed.
func closedCalls(b spi.Backend, owner string, ttl time.Duration, s spi.SessionID, name string, tok int64, group string) []closedCall {
	calls := []closedCall{
		{"OpenSession", func(c context.Context) error { _, err := b.OpenSession(c, owner, ttl); return err }},
		{"KeepAlive", func(c context.Context) error {
			_, err := b.KeepAlive(c, s, []string{name}, []string{group})
			return err
		}},
		{"Acquire", func(c context.Context) error { _, err := b.Acquire(c, s, name); return err }},
		{"Release", func(c context.Context) error { return b.Release(c, s, name, tok) }},
		{"Join", func(c context.Context) error { _, err := b.Join(c, s, group); return err }},
		{"Leave", func(c context.Context) error { _, err := b.Leave(c, s, group); return err }},
		{"Members", func(c context.Context) error { _, err := b.Members(c, group); return err }},
		{"CloseSession", func(c context.Context) error { return b.CloseSession(c, s) }},
	}
	if q, ok := b.(spi.Queuer); ok {
		calls = append(calls,
			closedCall{"AcquireQueued", func(c context.Context) error { _, err := q.AcquireQueued(c, s, name); return err }},
			closedCall{"Withdraw", func(c context.Context) error { return q.Withdraw(c, s, name) }})
	}
	if hb, ok := b.(spi.Hinter); ok {
		calls = append(calls, closedCall{"Hints", func(c context.Context) error {
			ch, err := hb.Hints(c)
			if err == nil && ch == nil {
				return errors.New("Hints returned a nil channel and no error")
			}
			return err
		}})
	}
	if in, ok := b.(spi.Inspector); ok {
		calls = append(calls, closedCall{"Inspect", func(c context.Context) error { _, err := in.Inspect(c); return err }})
	}
	if li, ok := b.(spi.LeaseInspector); ok {
		calls = append(calls, closedCall{"InspectLease", func(c context.Context) error {
			_, _, err := li.InspectLease(c, name)
			return err
		}})
	}
	return calls
}

// closedCallsFail checks spi.Backend's "after Close, every method fails with an error matching
// ErrBackendClosed": a backend with a session that holds a lease, is a member of a group (and,
// for a Hinter, a live hint subscription) is closed, twice (not an error); then every method
// of the SPI and of the optional interfaces it implements (Queuer, Hinter, Inspector,
// LeaseInspector) is called, on that session, lease and group, and each must return an error
// matching spi.ErrBackendClosed (spi.ErrClosed alone is the client's, and a timeout is not
// one) before its context ends. The hint channel subscribed before Close must close. A
// WaitEnder's EndWait and a TTLChecker's CheckTTL, which make no call to the server and
// return no error (CheckTTL may be called on a closed backend), must return too, and CheckTTL
// must still accept the TTL the session was opened with.
func (h *harness) closedCallsFail(t *testing.T) {
	c := h.backend(t)
	b := c.Backend
	s := h.open(t, b, h.long)
	name, group := h.name("closed"), h.name("closedg")
	tok := h.grant(t, b, s, name)
	h.join(t, b, s, group)
	var hints <-chan spi.Hint
	if hb, ok := b.(spi.Hinter); ok {
		subCtx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch, err := hb.Hints(subCtx)
		if err != nil {
			t.Fatalf("Hints: %v", err)
		}
		hints = ch
	}
	for i := range 2 {
		if err := returns(t, fmt.Sprintf("Close #%d", i+1), func(context.Context) error { return b.Close() }); err != nil {
			t.Errorf("Close #%d = %v, want nil (closing twice is not an error)", i+1, err)
		}
	}
	for _, call := range closedCalls(b, h.owner(), h.long, s, name, tok, group) {
		err := returns(t, call.name, call.run)
		if !errors.Is(err, spi.ErrBackendClosed) {
			t.Errorf("%s after Close = %v, want an error matching spi.ErrBackendClosed", call.name, err)
		}
	}
	if we, ok := b.(spi.WaitEnder); ok {
		returns(t, "EndWait", func(context.Context) error { we.EndWait(s, name); return nil })
	}
	if err := returns(t, "CheckTTL", func(context.Context) error { return spi.CheckTTL(b, h.long) }); err != nil {
		t.Errorf("CheckTTL(%v) after Close = %v, want nil as before Close (it may be called on a closed backend)", h.long, err)
	}
	if hints != nil {
		timeout := time.After(callTimeout)
		for open := true; open; {
			select {
			case _, open = <-hints:
			case <-timeout:
				t.Fatalf("the hint channel subscribed before Close is still open %v after it (Hints delivers until ctx is done or the backend is closed, then closes the channel)", callTimeout)
			}
		}
	}
}

// returns runs call with a context of callTimeout and returns its error, failing the test if
// the call has not returned closedGrace after its context ended (a call that ignores its
// context hangs its caller).
func returns(t *testing.T, what string, call func(context.Context) error) error {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- call(c) }()
	select {
	case err := <-done:
		return err
	case <-time.After(callTimeout + closedGrace):
		t.Fatalf("%s has not returned %v after its context ended", what, closedGrace)
		return nil
	}
}
