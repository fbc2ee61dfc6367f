package mapbackend_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"example.com/mapbackend"
	"github.com/simba-go/simba/spi"
	"github.com/simba-go/simba/tck"
)

// Two connections to one server, as two processes would have, talk to it through the SPI the
// way a simba.Client does: a grant, a HeldBy reply for the other session, a release with the
// grant's token, and the next grant with a greater token.
func Example() {
	ctx := context.Background()
	srv := mapbackend.NewServer(spi.SystemClock())
	a, b := srv.Connect(), srv.Connect()
	defer a.Close()
	defer b.Close()

	sa, _ := a.OpenSession(ctx, "worker-a", 10*time.Second)
	sb, _ := b.OpenSession(ctx, "worker-b", 10*time.Second)

	grant, _ := a.Acquire(ctx, sa.ID, "invoice-42")
	fmt.Println("a:", grant.Kind, "token", grant.Token)
	r, _ := b.Acquire(ctx, sb.ID, "invoice-42")
	fmt.Println("b:", r.Kind, r.HolderOwner)

	_ = a.Release(ctx, sa.ID, "invoice-42", grant.Token)
	r, _ = b.Acquire(ctx, sb.ID, "invoice-42")
	fmt.Println("b:", r.Kind, "token", r.Token)

	// Replies are values; errors are for calls that failed. A bad name fails before any work,
	// with an error the client classifies as permanent.
	_, err := a.Acquire(ctx, sa.ID, "no spaces")
	fmt.Println(errors.Is(err, spi.ErrInvalidName), spi.Classify(err))
	// Output:
	// a: granted token 1
	// b: held-by worker-a
	// b: granted token 2
	// true permanent
}

// TestConformance runs the four conformance suites against the backend (FairnessSpec because
// Backend implements spi.Queuer), each on its own server on real time (ClientSpec and
// FairnessSpec's client scenario need real time; the others would accept a Factory.Wait that
// advances a virtual clock). ExpireSession lets the suites force an expiry instead of
// waiting out a TTL, and Hints and GroupHints turn on the hint checks (Released and GroupChanged
// hints) since Backend implements spi.Hinter and hints every membership change.
func TestConformance(t *testing.T) {
	factory := func() tck.Factory {
		srv := mapbackend.NewServer(spi.SystemClock())
		return tck.Factory{
			NewBackend:    func(testing.TB, tck.BackendConfig) spi.Backend { return srv.Connect() },
			ExpireSession: func(_ testing.TB, id spi.SessionID) { srv.ExpireSession(id) },
			MinTTL:        300 * time.Millisecond,
			MaxTTL:        mapbackend.MaxTTL,
			Hints:         true,
			GroupHints:    true,
		}
	}
	t.Run("LeaseBackendSpec", func(t *testing.T) { tck.LeaseBackendSpec(t, factory()) })
	t.Run("FencingSpec", func(t *testing.T) { tck.FencingSpec(t, factory()) })
	t.Run("ClientSpec", func(t *testing.T) { tck.ClientSpec(t, factory()) })
	t.Run("FairnessSpec", func(t *testing.T) { tck.FairnessSpec(t, factory()) })
}

// Inspect (spi.Inspector) lists the lease rows, including free ones with their latest token, the
// live sessions and the groups; a closed connection fails every call with spi.ErrBackendClosed
// (which matches spi.ErrClosed too: the SPI asks for the former, naming what was closed) and
// closes its hint channels, while its sessions stay until they expire.
func TestInspectAndClose(t *testing.T) {
	ctx := context.Background()
	srv := mapbackend.NewServer(nil)
	a, b := srv.Connect(), srv.Connect()
	defer b.Close()
	s, err := a.OpenSession(ctx, "owner-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.Acquire(ctx, s.ID, "held")
	if err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire = %+v, %v", r, err)
	}
	r, err = a.Acquire(ctx, s.ID, "freed")
	if err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire = %+v, %v", r, err)
	}
	if err := a.Release(ctx, s.ID, "freed", r.Token); err != nil {
		t.Fatal(err)
	}
	if st, err := a.Join(ctx, s.ID, "workers"); err != nil || st != spi.OK {
		t.Fatalf("Join = %v, %v", st, err)
	}
	hints, err := a.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}

	snap, err := b.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Leases) != 2 || snap.Leases[0] != (spi.LeaseInfo{Name: "freed", Token: 1}) ||
		snap.Leases[1].Name != "held" || snap.Leases[1].Holder != s.ID || snap.Leases[1].Owner != "owner-a" ||
		snap.Leases[1].Token != 1 || snap.Leases[1].Remaining <= 0 || snap.Leases[1].Remaining > time.Minute {
		t.Errorf("Inspect leases = %+v", snap.Leases)
	}
	if len(snap.Sessions) != 1 || snap.Sessions[0].ID != s.ID || snap.Sessions[0].Owner != "owner-a" {
		t.Errorf("Inspect sessions = %+v", snap.Sessions)
	}
	if ms := snap.Groups["workers"]; len(ms) != 1 || ms[0] != s.ID {
		t.Errorf("Inspect groups = %v", snap.Groups)
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, ok := <-hints; ok {
		t.Error("hint channel still open after Close")
	}
	if _, err := a.KeepAlive(ctx, s.ID, nil, nil); !errors.Is(err, spi.ErrBackendClosed) || spi.Classify(err) != spi.Permanent {
		t.Errorf("KeepAlive after Close: %v, want a permanent spi.ErrBackendClosed", err)
	}
	if r, err := b.Acquire(ctx, mustOpen(t, b), "held"); err != nil || r.Kind != spi.HeldBy || r.Holder != s.ID {
		t.Errorf("Acquire after the holder's connection closed = %+v, %v; want held by %s until its session expires", r, err, s.ID)
	}
	if !srv.ExpireSession(s.ID) || srv.ExpireSession(s.ID) {
		t.Error("ExpireSession: want true for a live session, then false")
	}
	if r, err := b.Acquire(ctx, mustOpen(t, b), "held"); err != nil || r.Kind != spi.Granted || r.Token != 2 {
		t.Errorf("Acquire after the holder expired = %+v, %v; want granted with token 2", r, err)
	}
}

func mustOpen(t *testing.T, b spi.Backend) spi.SessionID {
	t.Helper()
	s, err := b.OpenSession(context.Background(), "owner-b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}
