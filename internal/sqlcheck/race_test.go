package sqlcheck

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// renewalBeatsTakeover: the holder's renewal has run (its now was before the expiry) but not
// committed when the holder's session expires by the clock; a takeover started then must wait
// for the renewal and see it, answering HeldBy, never Granted. open and acquire run outside the
// renewal; renewInTx runs the dialect's renewal inside an open transaction and returns the
// function that ends it (commit or roll back) and whether the renewal renewed. On a loaded
// machine the renewal can start after the expiry it should beat; that attempt proves nothing
// (its precondition failed, not the property), so the scenario runs again, up to 5 times.
func renewalBeatsTakeover(t *testing.T, o ops, renewInTx func(ctx context.Context, sid string) (end func(commit bool) error, renewed bool, err error)) {
	for attempt := 1; attempt <= 5; attempt++ {
		if renewalBeatsTakeoverOnce(t, o, renewInTx, attempt) {
			return
		}
		t.Logf("attempt %d: the renewal started after the holder's expiry (a loaded machine); running the scenario again", attempt)
	}
	t.Fatal("the renewal never started before the holder's expiry in 5 attempts")
}

// renewalBeatsTakeoverOnce runs the scenario once; false means its renewal came too late to
// test anything.
func renewalBeatsTakeoverOnce(t *testing.T, o ops, renewInTx func(ctx context.Context, sid string) (func(commit bool) error, bool, error), attempt int) bool {
	ctx := testCtx(t)
	p := unique(t) + strconv.Itoa(attempt)
	h, b, n := p+"h", p+"b", "sqlcheck-"+p+".race"
	// The renewal runs at 5/6 of the TTL, so it moves the expiry to 11/6; the takeover starts
	// just after the old expiry and the renewal commits at about 4/3.
	const ttl = 600
	if err := o.open(ctx, h, "holder", ttl); err != nil {
		t.Fatal(err)
	}
	if err := o.open(ctx, b, "taker", longTTL); err != nil {
		t.Fatal(err)
	}
	if r, err := o.acquire(ctx, h, n); err != nil || r.Kind != "granted" {
		t.Fatalf("holder's acquire: %+v, %v", r, err)
	}
	time.Sleep(ttl * 5 / 6 * time.Millisecond)
	end, renewed, err := renewInTx(ctx, o.sessionID(h))
	if err != nil {
		t.Fatal(err)
	}
	if !renewed {
		if err := end(false); err != nil {
			t.Fatal(err)
		}
		return false
	}
	commit := func() error { return end(true) }
	time.Sleep((ttl/6 + 30) * time.Millisecond) // the old expiry has passed; the renewal is not committed
	done := make(chan acquireReply, 1)
	errc := make(chan error, 1)
	go func() {
		r, err := o.acquire(ctx, b, n)
		errc <- err
		done <- r
	}()
	select {
	case r := <-done:
		cerr := commit() // never leave the renewal's transaction (and its connection) open
		t.Fatalf("the takeover did not wait for the holder's renewal: %+v, %v (commit: %v)", r, <-errc, cerr)
	case <-time.After(150 * time.Millisecond):
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.Kind != "held" || r.Holder != h {
		t.Fatalf("takeover during the holder's renewal: %+v, want held by %s", r, h)
	}
	ka, err := o.keepAlive(ctx, h, nil)
	if err != nil || ka.Expired {
		t.Fatalf("holder's keep-alive: %+v, %v", ka, err)
	}
	if _, ok := ka.Held[n]; !ok {
		t.Fatalf("holder lost %s: %+v", n, ka)
	}
	return true
}
