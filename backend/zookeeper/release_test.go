package zookeeper

import (
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
