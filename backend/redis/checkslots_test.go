package redis

import (
	"context"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/spi"
)

// TestHintsConfirmationReadsLeasesOfSeveralSlots: the read that follows subscriptions'
// confirmations covers every name confirmed since the last round, and on a Cluster those are
// in many slots. It read them all in one MULTI, which the Cluster client refuses across slots
// (CROSSSLOT), so every read failed and releases made before the subscriptions were in place
// went unhinted: a trial saw a member that joined a group wait up to a TTL (2.1 to 2.9 s at TTL
// 3 s, in about one join of ten) for partitions whose holders had released them at once. The
// runner is held before it subscribes, so that the read this test makes is the only one.
func TestHintsConfirmationReadsLeasesOfSeveralSlots(t *testing.T) {
	hintModes(t, func(t *testing.T, newClient func(testing.TB) goredis.UniversalClient) {
		ctx := context.Background()
		other := newBackend(t, newClient(t))
		o := open(t, other, time.Minute)
		hold := make(chan struct{})
		var once sync.Once
		release := func() { once.Do(func() { close(hold) }) }
		checked := make(chan string, 16)
		b, hints := hinted(t, newClient, func(h *hub) {
			h.beforeSubscribe = func([]string) { <-hold }
			h.checked = func(name string, hinted bool) {
				if hinted {
					checked <- name
				}
			}
		})
		t.Cleanup(release) // registered after hinted's: runs before the backend closes
		s := open(t, b, time.Minute)

		names := []string{uniq(t, "slots")}
		for len(names) < 3 {
			if n := uniq(t, "slots"); slotOf(n) != slotOf(names[len(names)-1]) {
				names = append(names, n)
			}
		}
		for _, n := range names {
			r, err := other.AcquireQueued(ctx, o, n)
			if err != nil || r.Kind != spi.Granted {
				t.Fatalf("acquire %s: %+v %v", n, r, err)
			}
			if w, err := b.AcquireQueued(ctx, s, n); err != nil || w.Kind != spi.HeldBy {
				t.Fatalf("waiter's acquire of %s: %+v %v", n, w, err)
			}
			if err := other.Release(ctx, o, n, r.Token); err != nil {
				t.Fatal(err)
			}
		}
		b.hub.mu.Lock()
		c := b.hub.conn
		b.hub.mu.Unlock()
		b.hub.check(ctx, c, names)
		want := map[string]bool{}
		for _, n := range names {
			want[n] = true
		}
		for len(want) > 0 {
			select {
			case n := <-checked:
				delete(want, n)
				awaitHint(t, hints, spi.Hint{Kind: spi.Released, Name: n})
			case <-time.After(5 * time.Second):
				t.Fatalf("no Released hint from the read for %v", want)
			}
		}
		release()
	})
}
