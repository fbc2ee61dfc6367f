package sql

import (
	"testing"

	"github.com/simba-go/simba/spi"
	"github.com/simba-go/simba/tck"
)

// factory describes one dialect's test database to the TCK: every backend is a new client (its
// own pool) of the same database, migrated once; ExpireSession sets the session's expiry to the
// database clock with test-only SQL.
func factory(t *testing.T, dsn string) tck.Factory {
	admin := migrated(t, dsn)
	return tck.Factory{
		NewBackend: func(t testing.TB, _ tck.BackendConfig) spi.Backend {
			// cfg.Clock is client time: SQL backends decide on the database clock only.
			b, err := Open(testCtx(t), dsn)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		ExpireSession:  func(t testing.TB, id spi.SessionID) { expire(t, admin, id) },
		PersistsTokens: true,
		Hints:          admin.PushesHints(),
		GroupHints:     admin.PushesHints(), // PostgreSQL NOTIFY; MySQL/MariaDB and SQLite hint releases alone
	}
}

func TestLeaseBackendSpec(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			tck.LeaseBackendSpec(t, factory(t, d.dsn(t)))
		})
	}
}

func TestFencingSpec(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			tck.FencingSpec(t, factory(t, d.dsn(t)))
		})
	}
}

func TestClientSpec(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			tck.ClientSpec(t, factory(t, d.dsn(t)))
		})
	}
}

func TestFairnessSpec(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			tck.FairnessSpec(t, factory(t, d.dsn(t)))
		})
	}
}
