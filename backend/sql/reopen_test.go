package sql

import (
	"testing"

	"github.com/simba-go/simba/internal/outagetest"
)

// TestReopenAtOnceAfterOutage: a client whose session an outage took (connections refused, or
// a blackhole) reopens it, and an election started during the outage and a Lock that waited
// through it are granted, within 1.5 s (refused) or 2 s (blackholed) of the client's time
// after the heal (outagetest.Reopen). The client used to wait for its next open after a backoff
// of up to a renewal interval (20 s at the TTL of 60 s used), after the timeout of an open that
// hung on the blackholed link as well.
func TestReopenAtOnceAfterOutage(t *testing.T) {
	for _, blackhole := range []bool{false} { // blackholed: in backend/redis (here it is slow: real-time redials)
		name := map[bool]string{false: "Refused", true: "Blackhole"}[blackhole]
		t.Run("PostgreSQL/"+name, func(t *testing.T) {
			dsn := pgDSN(t)
			direct := migrated(t, dsn)
			pdsn, p := proxyPgDSN(t, dsn, nil)
			outagetest.Reopen(t, open(t, pdsn), direct, p, "reopen-"+unique(t), blackhole)
		})
		t.Run("MySQL/"+name, func(t *testing.T) {
			dsn := myDSN(t)
			direct := migrated(t, dsn)
			pdsn, p := proxyDSN(t, dsn, "3306")
			outagetest.Reopen(t, open(t, pdsn), direct, p, "reopen-"+unique(t), blackhole)
		})
	}
}

// TestGroupReopenAtOnceAfterOutage: a client joined to a group (leading its partitions)
// before an outage its session lives through, and joining another during it, is a member of
// both and leads all their partitions within 1.5 s of the client's time after the heal
// (connections refused: outagetest.GroupReopen). The Join used to wait for its backoff (up to
// 20 s at the TTL of 60 s used).
func TestGroupReopenAtOnceAfterOutage(t *testing.T) {
	t.Run("PostgreSQL/Refused", func(t *testing.T) {
		dsn := pgDSN(t)
		migrated(t, dsn)
		pdsn, p := proxyPgDSN(t, dsn, nil)
		outagetest.GroupReopen(t, open(t, pdsn), p, "groupreopen-"+unique(t), false)
	})
	t.Run("MySQL/Refused", func(t *testing.T) {
		dsn := myDSN(t)
		migrated(t, dsn)
		pdsn, p := proxyDSN(t, dsn, "3306")
		outagetest.GroupReopen(t, open(t, pdsn), p, "groupreopen-"+unique(t), false)
	})
}
