package zookeeper

import (
	"strconv"
	"testing"
	"time"

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
	for _, blackhole := range []bool{false} { // blackholed: in backend/redis (here it is slow: real-time redials)
		t.Run(map[bool]string{false: "Refused", true: "Blackhole"}[blackhole], func(t *testing.T) {
			addr := testenv.ZooKeeper(t)[0]
			p := faultproxy.StartTest(t, addr)
			b := openBackend(t, "zk://"+p.Addr())
			direct := openBackend(t, "zk://"+addr)
			outagetest.Reopen(t, b, direct, p, "reopen-"+strconv.FormatInt(time.Now().UnixNano(), 36), blackhole)
		})
	}
}

// TestGroupReopenAtOnceAfterOutage: a client joined to a group (leading its partitions)
// before an outage its session lives through, and joining another during it, is a member of
// both and leads all their partitions within 1.5 s of the client's time after the heal
// (connections refused: outagetest.GroupReopen). The Join used to wait for its backoff (up to
// 20 s at the TTL of 60 s used).
func TestGroupReopenAtOnceAfterOutage(t *testing.T) {
	addr := testenv.ZooKeeper(t)[0]
	p := faultproxy.StartTest(t, addr)
	b := openBackend(t, "zk://"+p.Addr())
	outagetest.GroupReopen(t, b, p, "groupreopen-"+strconv.FormatInt(time.Now().UnixNano(), 36), false)
}
