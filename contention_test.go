package simba_test

import (
	"testing"
	"time"

	"github.com/simba-go/simba/internal/locktest"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// TestLockContentionMemory: 8 goroutines of one client and 8 of another take one lock in turns
// for 10 s on the memory backend, on real time: never two valid terms at once, tokens strictly
// increase, and every goroutine gets the lock.
func TestLockContentionMemory(t *testing.T) {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	clients := locktest.Clients(t, time.Second, srv.Backend(), srv.Backend())
	r := locktest.Contend(t, clients, locktest.Eight8("contended"))
	t.Logf("%d turns; per goroutine %v", r.Total, r.Turns)
}
