package redis

import (
	"testing"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/outagetest"
	"github.com/simba-go/simba/internal/testenv"
)

// TestReopenAtOnceAfterOutage: a client whose session a blackhole took reopens it, and its
// election and a Lock that waited through the outage are granted, before the open that hung
// when the link healed would have timed out (outagetest.Reopen). The client reopened only after
// that open's timeout and a backoff: up to two renewal intervals after the heal.
func TestReopenAtOnceAfterOutage(t *testing.T) {
	p := faultproxy.StartTest(t, testenv.Redis(t))
	b, err := Open("redis://"+p.Addr(), WithLogger(discard))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	direct, err := Open("redis://"+testenv.Redis(t), WithLogger(discard))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	outagetest.Reopen(t, b, direct, p, uniq("reopen"))
}
