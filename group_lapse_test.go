package simba_test

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/simbatest"
)

// TestGroupMemberThatStopsRenewingLosesItsPartitionsAtItsExpiry: on a backend that notifies no
// expiry (as SQL), a member cut off from the server leaves the survivors' member view when its
// session expires — the keep-alive replies tell when the first other member would expire, and
// the survivor reads the members then — not at the survivor's next keep-alive. The survivor's
// keep-alives run half a renewal interval out of phase with the cut member's, so without that
// read the takeover would come about 500 ms after the expiry.
func TestGroupMemberThatStopsRenewingLosesItsPartitionsAtItsExpiry(t *testing.T) {
	clock := simbatest.NewVirtualClock()
	w := &world{t: t, clock: clock, srv: simbatest.NewServer(simbatest.WithClock(clock),
		simbatest.WithModelOptions(simbatest.WithoutExpiryHints()))}
	ctx := context.Background()
	const P = 8
	t0 := clock.Now()
	ca, _ := w.client("a")
	ga, err := ca.JoinGroup(ctx, "lapse", P)
	if err != nil {
		t.Fatal(err)
	}
	w.until(5*time.Second, "a holds every partition", func() bool { return len(ga.Held()) == P })
	w.until(time.Second, "half a renewal interval after a's renewals", func() bool { return (clock.Now()-t0)%time.Second >= 500*time.Millisecond })
	cb, bb := w.client("b")
	gb, err := cb.JoinGroup(ctx, "lapse", P)
	if err != nil {
		t.Fatal(err)
	}
	w.until(10*time.Second, "the partitions spread over a and b", func() bool {
		return len(ga.Members()) == 2 && len(gb.Held()) > 0 && len(gb.Held())+len(ga.Held()) == P
	})
	// Cut b off right after one of its renewals: its session expires a TTL after that renewal.
	renewals := bb.Calls("KeepAlive")
	w.until(2*time.Second, "b's next renewal", func() bool { return bb.Calls("KeepAlive") > renewals })
	var expiry time.Duration
	for _, s := range w.srv.Snapshot().Sessions {
		if s.Owner == "b" {
			expiry = clock.Now() + s.Remaining
		}
	}
	if expiry == 0 {
		t.Fatal("b's session is not in the snapshot")
	}
	bb.CutOff(simbatest.Hang)
	w.until(3*testTTL, "a holds every partition again", func() bool { return len(ga.Held()) == P })
	late := clock.Now() - expiry
	t.Logf("a held every partition %v after b's session expired", late)
	if late > 200*time.Millisecond {
		t.Fatalf("a held b's partitions %v after b's session expired at the server, want ≤ 200ms (no read at the expiry)", late)
	}
}
