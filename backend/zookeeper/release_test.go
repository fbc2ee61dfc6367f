package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

// TestReleaseNeverDeletesTheNextHolder builds the race of issue 13 (item 3) on purpose.
// Session 1 is granted a name; before its session has set any watch on the new node (a test
// hook runs right after the create's reply), an outsider with Simba's credentials deletes the
// node and session 2, of another client, is granted the name: a new node, at the same data
// version 0. Session 1's release with its own token, which its record still says it holds,
// must then leave session 2's node alone (it used to delete it, since a delete can only be
// conditional on the data version), and session 2 must still hold the name. The second half
// releases after session 1 has seen the deletion, through the checked path.
func TestReleaseNeverDeletesTheNextHolder(t *testing.T) {
	dsn := serverChroot(t).DSN("simba:pw", "")
	b1, b2 := openBackend(t, dsn), openBackend(t, dsn)
	admin := rawClient(t, b1, "simba:pw")
	s1, s2 := openSession(t, b1, 10*time.Second), openSession(t, b2, 10*time.Second)
	zid := func(s spi.SessionID) int64 {
		v, err := strconv.ParseUint(string(s), 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		return int64(v)
	}
	zid1, zid2 := zid(s1), zid(s2)
	t.Cleanup(func() { testHookGranted.Store(nil) })
	for i := range 5 {
		name := fmt.Sprintf("raced-%d", i)
		path := b1.lay.lease(name)
		var fired atomic.Bool
		var tok2 atomic.Int64
		hookErr := make(chan error, 1)
		hook := func(p string) {
			if p != path || !fired.CompareAndSwap(false, true) {
				return // session 2's own acquire, or another name
			}
			hookErr <- func() error {
				// Session 1's create has been applied (its reply is in); make sure.
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
					ok, st, err := admin.Exists(path)
					if err != nil {
						return err
					}
					if ok && st.EphemeralOwner == zid1 {
						break
					}
					if time.Now().After(deadline) {
						return errors.New("session 1's node never appeared")
					}
				}
				if err := admin.Delete(path, -1); err != nil {
					return fmt.Errorf("outsider's delete: %w", err)
				}
				r, err := b2.Acquire(testCtx(t), s2, name)
				if err != nil || r.Kind != spi.Granted {
					return fmt.Errorf("session 2's Acquire = %+v, %v; want granted", r, err)
				}
				tok2.Store(r.Token)
				return nil
			}()
		}
		testHookGranted.Store(&hook)
		tok1 := mustGrant(t, b1, s1, name)
		testHookGranted.Store(nil)
		if !fired.Load() {
			t.Fatal("the hook never ran")
		}
		if err := <-hookErr; err != nil {
			t.Fatal(err)
		}
		if tok2.Load() <= tok1 {
			t.Fatalf("session 2's token %d, want > %d", tok2.Load(), tok1)
		}
		if err := b1.Release(testCtx(t), s1, name, tok1); err != nil {
			t.Fatal(err)
		}
		data, st, err := admin.Get(path)
		if err != nil || st.Czxid != tok2.Load() || st.EphemeralOwner != zid2 {
			t.Fatalf("round %d: after session 1's release of token %d, the node is %q %+v, %v; want session 2's (token %d)",
				i, tok1, data, st, err, tok2.Load())
		}
		ka, err := b2.KeepAlive(testCtx(t), s2, []string{name}, nil)
		if err != nil || ka.Expired || len(ka.Held) != 1 || ka.Held[0].Token != tok2.Load() {
			t.Fatalf("session 2's KeepAlive = %+v, %v; want %s held with %d", ka, err, name, tok2.Load())
		}
		if err := b2.Release(testCtx(t), s2, name, tok2.Load()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLateReleaseKeepsTheSessionsNextTerm: a release of token T1 whose multi-op is sent late
// (paused by a test hook after its check, on the hop worker) must not delete the node of the
// same session's next term (T2), which, created by the same session, is at the same data
// version 0 and passes the release's version check. Meanwhile another release of T1 and the
// session's next Acquire of the name are called; in the old code the Acquire was granted T2
// and the late release then deleted T2's node, so another session was granted the name while
// the first still held T2 by its reply. "gave up" is the same with the late release's caller
// having given up (its context cancelled) while the multi-op was still to be sent.
func TestLateReleaseKeepsTheSessionsNextTerm(t *testing.T) {
	dsn := serverChroot(t).DSN("simba:pw", "")
	b1, b2 := openBackend(t, dsn), openBackend(t, dsn)
	admin := rawClient(t, b1, "simba:pw")
	s1, s2 := openSession(t, b1, 10*time.Second), openSession(t, b2, 10*time.Second)
	t.Cleanup(func() { testHookReleasing.Store(nil); testHookReleased.Store(nil); testHookNameBusy.Store(nil) })
	for _, gaveUp := range []bool{false, true} {
		name := fmt.Sprintf("late-release-%v", gaveUp)
		path := b1.lay.lease(name)
		tok1 := mustGrant(t, b1, s1, name)

		var fired atomic.Bool
		paused, resume := make(chan struct{}), make(chan struct{})
		pause := func(n string) {
			if n == name && fired.CompareAndSwap(false, true) {
				close(paused)
				<-resume
			}
		}
		// the first release answered after the resume is the paused one: release #1 was
		// answered before it (old code) or waits for it (new)
		var resumed, overOnce atomic.Bool
		lateOver := make(chan struct{})
		over := func(n string) {
			if n == name && resumed.Load() && overOnce.CompareAndSwap(false, true) {
				close(lateOver)
			}
		}
		var busy atomic.Int32
		busyHook := func(n string) {
			if n == name {
				busy.Add(1)
			}
		}
		testHookReleasing.Store(&pause)
		testHookReleased.Store(&over)
		testHookNameBusy.Store(&busyHook)

		// Release #2 of T1: checked, its multi-op paused.
		ctx2, cancel2 := context.WithCancel(context.Background())
		t.Cleanup(cancel2)
		late := make(chan error, 1)
		go func() { late <- b1.Release(ctx2, s1, name, tok1) }()
		<-paused
		if gaveUp {
			cancel2()
			if err := <-late; !errors.Is(err, context.Canceled) {
				t.Fatalf("the late release's caller: %v, want context.Canceled", err)
			}
		}
		// until done returns true or the backend reports n requests waiting for the name
		waitFor := func(done <-chan struct{}, n int32) {
			for {
				select {
				case <-done:
					return
				case <-time.After(time.Millisecond):
					if busy.Load() >= n {
						return
					}
				}
			}
		}
		// Release #1 of T1 (landed, in the old code).
		rel1Done := make(chan struct{})
		var rel1Err error
		go func() { defer close(rel1Done); rel1Err = b1.Release(testCtx(t), s1, name, tok1) }()
		waitFor(rel1Done, 1)
		// The session's next acquire of the name.
		acqDone := make(chan struct{})
		var acq spi.Acquire
		var acqErr error
		go func() { defer close(acqDone); acq, acqErr = b1.Acquire(testCtx(t), s1, name) }()
		waitFor(acqDone, 2)
		resumed.Store(true)
		close(resume)
		<-rel1Done
		<-acqDone
		<-lateOver
		if !gaveUp {
			if err := <-late; err != nil {
				t.Fatalf("the late release: %v", err)
			}
		}
		if rel1Err != nil {
			t.Fatalf("release #1: %v", rel1Err)
		}
		if acqErr != nil || acq.Kind != spi.Granted || acq.Token <= tok1 {
			t.Fatalf("the next Acquire = %+v, %v; want granted a token > %d", acq, acqErr, tok1)
		}
		ok, st, err := admin.Exists(path)
		if err != nil || !ok || st.Czxid != acq.Token {
			t.Errorf("%s: after the late release of token %d, the node of token %d (granted) is gone: exists %v %+v, %v",
				name, tok1, acq.Token, ok, st, err)
		}
		r2, err := b2.Acquire(testCtx(t), s2, name)
		if err != nil || r2.Kind != spi.HeldBy || r2.Holder != s1 {
			t.Errorf("%s: session 2's Acquire while session 1 holds token %d = %+v, %v; want held by %s", name, acq.Token, r2, err, s1)
		}
		if err := b1.Release(testCtx(t), s1, name, acq.Token); err != nil {
			t.Fatal(err)
		}
	}
}
