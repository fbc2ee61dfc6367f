package etcd

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
	addr := testenv.Etcd(t)[0]
	prefix := testPrefix(t)
	p := faultproxy.StartTest(t, addr)
	b := openBackend(t, "etcd://"+p.Addr()+prefix)
	direct := openBackend(t, "etcd://"+addr+prefix)
	outagetest.Reopen(t, b, direct, p, "reopen")
}
