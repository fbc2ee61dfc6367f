package sql

import (
	"testing"

	"github.com/simba-go/simba/internal/outagetest"
)

// TestReopenAtOnceAfterOutage: a client whose session a blackhole took reopens it, and its
// election and a Lock that waited through the outage are granted, before the open that hung
// when the link healed would have timed out (outagetest.Reopen). The client reopened only after
// that open's timeout and a backoff: up to two renewal intervals after the heal.
func TestReopenAtOnceAfterOutage(t *testing.T) {
	t.Run("PostgreSQL", func(t *testing.T) {
		dsn := pgDSN(t)
		direct := migrated(t, dsn)
		pdsn, p := proxyPgDSN(t, dsn, nil)
		outagetest.Reopen(t, open(t, pdsn), direct, p, "reopen-"+unique(t))
	})
	t.Run("MySQL", func(t *testing.T) {
		dsn := myDSN(t)
		direct := migrated(t, dsn)
		pdsn, p := proxyDSN(t, dsn, "3306")
		outagetest.Reopen(t, open(t, pdsn), direct, p, "reopen-"+unique(t))
	})
}
