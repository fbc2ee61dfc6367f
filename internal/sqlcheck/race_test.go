package sqlcheck

import (
	"context"
	"testing"
	"time"
)

// renewalBeatsTakeover: the holder's renewal has run (its now was before the expiry) but not
// committed when the holder's session expires by the clock; a takeover started then must wait
// for the renewal and see it, answering HeldBy, never Granted. open and acquire run outside the
// renewal; renewInTx runs the dialect's renewal inside an open transaction and returns the
// function that commits it.
func renewalBeatsTakeover(t *testing.T, o ops, renewInTx func(ctx context.Context, sid string) (commit func() error, err error)) {
	ctx := testCtx(t)
	p := unique(t)
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
	commit, err := renewInTx(ctx, o.sessionID(h))
	if err != nil {
		t.Fatal(err)
	}
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
}
