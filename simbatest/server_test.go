package simbatest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openB(t *testing.T, b *Backend, owner string) spi.SessionID {
	t.Helper()
	s, err := b.OpenSession(ctxT(t), owner, ttl)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	return s.ID
}

func TestServerSharedBetweenClientsOnBackendTime(t *testing.T) {
	srv := NewServer()
	clock := srv.VirtualClock()
	if clock == nil {
		t.Fatal("default server clock is not a VirtualClock")
	}
	ctx := ctxT(t)
	a, b := srv.Backend(), srv.Backend()
	sa, sb := openB(t, a, "alice"), openB(t, b, "bob")
	if r, _ := a.Acquire(ctx, sa, "x"); r.Kind != spi.Granted {
		t.Fatalf("a: %+v", r)
	}
	clock.Advance(time.Second)
	r, err := b.Acquire(ctx, sb, "x")
	if err != nil || r.Kind != spi.HeldBy || r.Holder != sa || r.HolderOwner != "alice" || r.Remaining != ttl-time.Second {
		t.Fatalf("b sees %+v %v, want held by alice with %v left", r, err, ttl-time.Second)
	}
	clock.Advance(ttl)
	if r, _ := b.Acquire(ctx, sb, "x"); r.Kind != spi.SessionExpired {
		t.Fatalf("b after its TTL = %+v", r)
	}
	if got := srv.Calls("Acquire"); got != 3 {
		t.Fatalf("server Acquire calls = %d, want 3", got)
	}
	if got := a.Calls("Acquire"); got != 1 {
		t.Fatalf("client a Acquire calls = %d, want 1", got)
	}
	snap, err := b.Inspect(ctx)
	if err != nil || len(snap.Sessions) != 0 || len(snap.Leases) != 1 || snap.Leases[0].Holder != "" {
		t.Fatalf("Inspect = %+v %v", snap, err)
	}
}

func TestServerFailNext(t *testing.T) {
	srv := NewServer()
	b := srv.Backend()
	ctx := ctxT(t)
	b.FailNext(2, nil)
	for range 2 {
		_, err := b.OpenSession(ctx, "o", ttl)
		if !errors.Is(err, spi.ErrUnavailable) || !errors.Is(err, ErrInjected) || spi.Classify(err) != spi.Retryable {
			t.Fatalf("failed call: %v", err)
		}
	}
	if got := srv.Calls("OpenSession"); got != 0 {
		t.Fatalf("failed calls reached the server: %d", got)
	}
	openB(t, b, "o")
	perm := spi.AsPermanent(errors.New("auth failed"))
	srv.FailNext(1, perm)
	other := srv.Backend()
	if _, err := other.OpenSession(ctx, "o", ttl); !errors.Is(err, perm) {
		t.Fatalf("server-wide injected error = %v", err)
	}
	openB(t, other, "o")
}

func TestServerDropReplies(t *testing.T) {
	srv := NewServer()
	b := srv.Backend()
	ctx := ctxT(t)
	s := openB(t, b, "o")
	b.DropNextReplies(1)
	_, err := b.Acquire(ctx, s, "x")
	if !errors.Is(err, ErrReplyLost) || !errors.Is(err, spi.ErrUnavailable) {
		t.Fatalf("dropped reply: %v", err)
	}
	// The call took effect: the lease is held, and a keep-alive reports it.
	ka, err := b.KeepAlive(ctx, s, []string{"x"}, nil)
	if err != nil || len(ka.Held) != 1 || ka.Held[0] != (spi.Held{Name: "x", Token: 1}) {
		t.Fatalf("keep-alive after lost grant = %+v %v", ka, err)
	}
}

func TestServerDelaysOnServerClock(t *testing.T) {
	srv := NewServer()
	clock := srv.VirtualClock()
	b := srv.Backend()
	ctx := ctxT(t)
	s := openB(t, b, "o")

	b.DelayRequests(time.Second)
	done := make(chan spi.Acquire)
	go func() {
		r, _ := b.Acquire(ctx, s, "x")
		done <- r
	}()
	clock.BlockUntil(1)
	if _, ok := srv.Lease("x"); ok {
		t.Fatal("delayed request took effect before its delay")
	}
	clock.Advance(time.Second)
	if r := <-done; r.Kind != spi.Granted || r.Remaining != ttl-time.Second {
		t.Fatalf("delayed acquire = %+v, want granted at 1s", r)
	}

	// A delayed request whose context ends has no effect.
	short, cancel := context.WithCancel(ctx)
	errc := make(chan error)
	go func() {
		_, err := b.Acquire(short, s, "y")
		errc <- err
	}()
	clock.BlockUntil(1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled delayed call = %v", err)
	}
	if _, ok := srv.Lease("y"); ok {
		t.Fatal("cancelled delayed request took effect")
	}
	if clock.Pending() != 0 {
		t.Fatalf("cancelled delay left %d timers", clock.Pending())
	}
	b.DelayRequests(0)

	// A late reply: the call takes effect at once, the reply comes a second later.
	b.DelayReplies(time.Second)
	go func() {
		r, _ := b.Acquire(ctx, s, "z")
		done <- r
	}()
	clock.BlockUntil(1)
	if info, ok := srv.Lease("z"); !ok || info.Holder != s {
		t.Fatalf("late-reply call has not taken effect: %+v", info)
	}
	clock.Advance(time.Second)
	if r := <-done; r.Kind != spi.Granted {
		t.Fatalf("late reply = %+v", r)
	}
}

func TestServerCutOff(t *testing.T) {
	srv := NewServer()
	a, b := srv.Backend(), srv.Backend()
	ctx := ctxT(t)
	sa := openB(t, a, "a")
	a.CutOff(Refuse)
	if _, err := a.KeepAlive(ctx, sa, nil, nil); !errors.Is(err, ErrCutOff) || spi.Classify(err) != spi.Retryable {
		t.Fatalf("refused call = %v", err)
	}
	if _, err := a.Hints(ctx); !errors.Is(err, ErrCutOff) {
		t.Fatalf("Hints while cut off = %v", err)
	}
	openB(t, b, "b") // the other client is not cut off

	a.CutOff(Hang)
	errc := make(chan error)
	go func() {
		_, err := a.KeepAlive(ctx, sa, nil, nil)
		errc <- err
	}()
	select {
	case err := <-errc:
		t.Fatalf("hanging call returned %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	a.Restore()
	if err := <-errc; !errors.Is(err, ErrCutOff) {
		t.Fatalf("hung call after restore = %v", err)
	}
	if ka, err := a.KeepAlive(ctx, sa, nil, nil); err != nil || ka.Expired {
		t.Fatalf("keep-alive after restore = %+v %v", ka, err)
	}
	if got := srv.Calls("KeepAlive"); got != 1 {
		t.Fatalf("cut-off calls reached the server: %d keep-alives", got)
	}

	// A hanging call honours its context.
	srv.CutOff(Hang)
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := b.Members(short, "g"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hung call with deadline = %v", err)
	}
	srv.Heal()
	if _, err := b.Members(ctx, "g"); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}

func TestServerHints(t *testing.T) {
	srv := NewServer()
	a, b := srv.Backend(), srv.Backend()
	ctx := ctxT(t)
	sub, cancel := context.WithCancel(ctx)
	hints, err := b.Hints(sub)
	if err != nil {
		t.Fatal(err)
	}
	s := openB(t, a, "a")
	r, _ := a.Acquire(ctx, s, "x")
	a.Release(ctx, s, "x", r.Token)
	a.Join(ctx, s, "g")
	for _, want := range []spi.Hint{{Kind: spi.Released, Name: "x"}, {Kind: spi.GroupChanged, Name: "g"}} {
		if got := <-hints; got != want {
			t.Fatalf("hint %v, want %v", got, want)
		}
	}
	// Expiry hints are delivered when the server observes the expiry.
	a.Acquire(ctx, s, "y")
	srv.VirtualClock().Advance(ttl)
	srv.Tick()
	for _, want := range []spi.Hint{{Kind: spi.Released, Name: "y"}, {Kind: spi.GroupChanged, Name: "g"}} {
		if got := <-hints; got != want {
			t.Fatalf("expiry hint %v, want %v", got, want)
		}
	}
	// A cut-off subscriber misses hints.
	b.CutOff(Refuse)
	s2 := openB(t, a, "a")
	a.Join(ctx, s2, "g")
	b.Restore()
	a.Leave(ctx, s2, "g")
	if got := <-hints; got != (spi.Hint{Kind: spi.GroupChanged, Name: "g"}) {
		t.Fatalf("hint after restore %v", got)
	}
	select {
	case h := <-hints:
		t.Fatalf("extra hint %v", h)
	default:
	}
	cancel()
	for range hints {
	}
	// Close ends subscriptions and later calls.
	h2, _ := a.Hints(ctx)
	a.Close()
	if _, ok := <-h2; ok {
		t.Fatal("hint channel open after Close")
	}
	if _, err := a.OpenSession(ctx, "a", ttl); !errors.Is(err, spi.ErrBackendClosed) {
		t.Fatalf("call after Close = %v", err)
	}
	if _, err := a.Hints(ctx); !errors.Is(err, spi.ErrBackendClosed) {
		t.Fatalf("Hints after Close = %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestServerExpireRestartWait(t *testing.T) {
	srv := NewServer()
	a, b := srv.Backend(), srv.Backend()
	ctx := ctxT(t)
	sa, sb := openB(t, a, "a"), openB(t, b, "b")
	a.Acquire(ctx, sa, "x")
	info, err := srv.WaitHolder(ctx, "x")
	if err != nil || info.Holder != sa {
		t.Fatalf("WaitHolder = %+v %v", info, err)
	}
	got := make(chan spi.LeaseInfo)
	go func() {
		info, _ := srv.WaitHolder(ctx, "y")
		got <- info
	}()
	b.Acquire(ctx, sb, "y")
	if info := <-got; info.Holder != sb {
		t.Fatalf("WaitHolder(y) = %+v", info)
	}
	if !srv.ExpireSession(sa) || srv.ExpireSession(sa) {
		t.Fatal("ExpireSession reports wrong liveness")
	}
	if r, _ := b.Acquire(ctx, sb, "x"); r.Kind != spi.Granted || r.Token != 2 {
		t.Fatalf("takeover after forced expiry = %+v", r)
	}
	srv.Restart()
	if ka, _ := b.KeepAlive(ctx, sb, nil, nil); !ka.Expired {
		t.Fatal("session survived restart")
	}
	sc := openB(t, b, "c")
	if r, _ := b.Acquire(ctx, sc, "x"); r.Token != 3 {
		t.Fatalf("token after restart = %+v", r)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := srv.WaitHolder(short, "never"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitHolder timeout = %v", err)
	}
}

func TestServerConcurrentClients(t *testing.T) {
	srv := NewServer()
	ctx := ctxT(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := srv.Backend()
			defer b.Close()
			s, err := b.OpenSession(ctx, "o", ttl)
			if err != nil {
				t.Error(err)
				return
			}
			r, err := b.Acquire(ctx, s.ID, "x")
			if err != nil {
				t.Error(err)
				return
			}
			if r.Kind == spi.Granted {
				mu.Lock()
				granted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if granted != 1 {
		t.Fatalf("%d clients were granted the lease, want 1", granted)
	}
}

// TestServerRetriesWithdrawals: with WithSessionWaiters a Withdraw that fails runs again with
// the session's next keep-alive (an entry would otherwise hold a free lease back as long as
// its session lives), unless the session queued for the name again meanwhile.
func TestServerRetriesWithdrawals(t *testing.T) {
	srv := NewServer(WithModelOptions(WithSessionWaiters()))
	ctx := ctxT(t)
	hb, wb := srv.Backend(), srv.Backend()
	if !wb.QueueEntriesLiveWithSession() || NewServer().Backend().QueueEntriesLiveWithSession() {
		t.Fatal("QueueEntriesLiveWithSession does not follow the model's WithSessionWaiters")
	}
	h, w := openB(t, hb, "h"), openB(t, wb, "w")
	if r, err := hb.Acquire(ctx, h, "x"); err != nil || r.Kind != spi.Granted {
		t.Fatalf("grant = %+v, %v", r, err)
	}
	if r, err := wb.AcquireQueued(ctx, w, "x"); err != nil || r.Kind != spi.HeldBy {
		t.Fatalf("w's AcquireQueued = %+v, %v; want held by h", r, err)
	}
	if err := hb.Release(ctx, h, "x", 1); err != nil {
		t.Fatal(err)
	}
	wb.FailNext(1, nil)
	if err := wb.Withdraw(ctx, w, "x"); !errors.Is(err, ErrInjected) {
		t.Fatalf("Withdraw = %v, want the injected failure", err)
	}
	if r, _ := hb.Acquire(ctx, h, "x"); r.Kind != spi.HeldBy || r.Holder != w {
		t.Fatalf("after the failed withdrawal h's acquire = %+v, want held by w", r)
	}
	if _, err := wb.KeepAlive(ctx, w, nil, nil); err != nil {
		t.Fatal(err)
	}
	if r, _ := hb.Acquire(ctx, h, "x"); r.Kind != spi.Granted {
		t.Fatalf("after w's keep-alive h's acquire = %+v, want granted", r)
	}
	// A failed withdrawal followed by a new wait is not run again.
	if r, _ := wb.AcquireQueued(ctx, w, "x"); r.Kind != spi.HeldBy {
		t.Fatalf("w's second wait = %+v", r)
	}
	wb.FailNext(1, nil)
	if err := wb.Withdraw(ctx, w, "x"); err == nil {
		t.Fatal("Withdraw did not fail")
	}
	if r, _ := wb.AcquireQueued(ctx, w, "x"); r.Kind != spi.HeldBy {
		t.Fatalf("w's third wait = %+v", r)
	}
	if _, err := wb.KeepAlive(ctx, w, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := hb.Release(ctx, h, "x", 2); err != nil {
		t.Fatal(err)
	}
	if r, _ := hb.Acquire(ctx, h, "x"); r.Kind != spi.HeldBy || r.Holder != w {
		t.Fatalf("w still waits: h's acquire = %+v, want held by w", r)
	}
}
