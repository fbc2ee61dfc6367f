package redis

import (
	"testing"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/outagetest"
	"github.com/simba-go/simba/internal/testenv"
)

// TestReopenAtOnceAfterOutage: a client whose session an outage took (connections refused, or
// a blackhole) reopens it, and an election started during the outage and a Lock that waited
// through it are granted, within 1.5 s (refused) or 2 s (blackholed) of the client's time
// after the heal (outagetest.Reopen). The client used to wait for its next open after a backoff
// of up to a renewal interval (20 s at the TTL of 60 s used), after the timeout of an open that
// hung on the blackholed link as well.
func TestReopenAtOnceAfterOutage(t *testing.T) {
	for _, blackhole := range []bool{false, true} {
		t.Run(map[bool]string{false: "Refused", true: "Blackhole"}[blackhole], func(t *testing.T) {
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
			outagetest.Reopen(t, b, direct, p, uniq(t, "reopen"), blackhole)
		})
	}
}

// TestGroupReopenAtOnceAfterOutage: a client joined to a group (leading its partitions)
// before an outage its session lives through, and joining another during it, is a member of
// both and leads all their partitions within 1.5 s (refused) or 2 s (blackholed) of the
// client's time after the heal (outagetest.GroupReopen). The Join used to wait for its backoff
// (up to 20 s at the TTL of 60 s used), or, blackholed, for the timeout of the Join that hung.
func TestGroupReopenAtOnceAfterOutage(t *testing.T) {
	for _, blackhole := range []bool{false, true} {
		t.Run(map[bool]string{false: "Refused", true: "Blackhole"}[blackhole], func(t *testing.T) {
			p := faultproxy.StartTest(t, testenv.Redis(t))
			b, err := Open("redis://"+p.Addr(), WithLogger(discard))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			outagetest.GroupReopen(t, b, p, uniq(t, "groupreopen"), blackhole)
		})
	}
}
