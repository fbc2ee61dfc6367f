package sql

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// withDatabase returns dsn naming the database db instead of its own.
func withDatabase(t *testing.T, dsn, db string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + db
	return u.String()
}

// wantNoDatabase checks that err, from a DSN naming a database that does not exist, is a
// permanent ErrSchemaMissing that says so, names the database, says to create it and which
// migration to apply after.
func wantNoDatabase(t *testing.T, err error, db, migration string) {
	t.Helper()
	if !errors.Is(err, spi.ErrSchemaMissing) || spi.Classify(err) != spi.Permanent {
		t.Fatalf("err = %v (class %v), want a permanent ErrSchemaMissing", err, spi.Classify(err))
	}
	for _, s := range []string{"database does not exist", db, "CREATE DATABASE", migration} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("err %q does not say %q", err, s)
		}
	}
}

// TestMySQLUnknownDatabase: a DSN naming a database that does not exist on the shared
// MySQL/MariaDB server was an untyped "Error 1049: Unknown database" with no hint (trial27).
func TestMySQLUnknownDatabase(t *testing.T) {
	db := "simba_nosuchdb_" + unique(t)
	err := sessionErr(t, withDatabase(t, myDSN(t), db))
	t.Log(err)
	wantNoDatabase(t, err, db, "0001_init.sql")
}

// TestPostgresUnknownDatabase: the same on PostgreSQL (3D000, invalid_catalog_name), which
// was a permanent error without ErrSchemaMissing or a hint.
func TestPostgresUnknownDatabase(t *testing.T) {
	db := "simba_nosuchdb_" + unique(t)
	err := sessionErr(t, withDatabase(t, testenv.Postgres(t), db))
	t.Log(err)
	wantNoDatabase(t, err, db, "0001_init.sql")
}
