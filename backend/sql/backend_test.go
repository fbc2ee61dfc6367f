package sql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
	"github.com/simba-go/simba/sql/schema"
)

const longTTL = 30 * time.Second

func openSession(t testing.TB, b *Backend, ttl time.Duration) spi.SessionID {
	t.Helper()
	s, err := b.OpenSession(testCtx(t), "test-owner", ttl)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	return s.ID
}

func grant(t testing.TB, b *Backend, s spi.SessionID, name string) int64 {
	t.Helper()
	r, err := b.Acquire(testCtx(t), s, name)
	if err != nil || r.Kind != spi.Granted {
		t.Fatalf("Acquire(%q) = %+v, %v; want granted", name, r, err)
	}
	return r.Token
}

// TestSchemaMissingNamesTheMigration: before Migrate, the first operation fails with an error
// matching ErrSchemaMissing that names the migration file; an old schema (version row gone) the
// same; Migrate fixes both and is idempotent, also when several clients run it at once.
func TestSchemaMissingNamesTheMigration(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			dsn := d.dsn(t)
			b := open(t, dsn)
			want := "sql/schema/" + d.name + "/0001_init.sql"
			_, err := b.OpenSession(testCtx(t), "o", longTTL)
			if !errors.Is(err, spi.ErrSchemaMissing) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Migrate") {
				t.Fatalf("OpenSession on an empty database: %v; want ErrSchemaMissing naming %s and Migrate", err, want)
			}
			if spi.Classify(err) != spi.Permanent {
				t.Fatalf("schema missing classified %v", spi.Classify(err))
			}
			// The server's message once: the text used to end by repeating it after a second
			// "schema missing".
			if n := strings.Count(err.Error(), spi.ErrSchemaMissing.Error()); n != 1 {
				t.Fatalf("OpenSession on an empty database: %q says %q %d times", err, spi.ErrSchemaMissing, n)
			}
			// An empty database needs every migration, and the error names them all, in order:
			// it named 0001_init.sql alone, and whoever applied just that met the error again.
			var paths []string
			for _, m := range schema.Migrations(d.name) {
				paths = append(paths, "sql/schema/"+m.Path)
			}
			if all := strings.Join(paths, ", then "); !strings.Contains(err.Error(), "apply "+all+" ") {
				t.Fatalf("OpenSession on an empty database: %q does not name the migrations %s", err, all)
			}
			if _, err := b.SchemaVersion(testCtx(t)); !errors.Is(err, spi.ErrSchemaMissing) {
				t.Fatalf("SchemaVersion on an empty database: %v", err)
			}
			// Three clients migrate at once, twice each.
			var wg sync.WaitGroup
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					m := open(t, dsn)
					for range 2 {
						if err := m.Migrate(testCtx(t)); err != nil {
							t.Errorf("concurrent Migrate: %v", err)
						}
					}
				}()
			}
			wg.Wait()
			ms := schema.Migrations(d.name)
			if v, err := b.SchemaVersion(testCtx(t)); err != nil || v != int64(ms[len(ms)-1].Version) || v < schema.LatestVersion { // every migration
				t.Fatalf("SchemaVersion after Migrate = %d, %v", v, err)
			}
			// An old schema: the version row is gone.
			exec(t, b, "DELETE FROM simba_schema_version")
			old := open(t, dsn)
			if _, err := old.OpenSession(testCtx(t), "o", longTTL); !errors.Is(err, spi.ErrSchemaMissing) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "older") {
				t.Fatalf("OpenSession on an old schema: %v; want ErrSchemaMissing naming %s", err, want)
			}
			if err := old.CheckSchema(testCtx(t)); !errors.Is(err, spi.ErrSchemaMissing) {
				t.Fatalf("CheckSchema on an old schema: %v", err)
			}
			if err := old.Migrate(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			s := openSession(t, old, longTTL)
			grant(t, old, s, "schema-"+unique(t))
			if err := old.CheckSchema(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			// A database at the fence schema's version, before the waiter queues: the error
			// names the migration still to apply.
			exec(t, b, "DELETE FROM simba_schema_version WHERE version > 2")
			waiters := d.name + "/0003_waiters.sql"
			if _, err := open(t, dsn).OpenSession(testCtx(t), "o", longTTL); !errors.Is(err, spi.ErrSchemaMissing) || !strings.Contains(err.Error(), waiters) || strings.Contains(err.Error(), "0001_init") {
				t.Fatalf("OpenSession on a version 2 schema: %v; want ErrSchemaMissing naming %s only", err, waiters)
			}
			if err := open(t, dsn, WithAutoMigrate()).CheckSchema(testCtx(t)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestAutoMigrate(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			b := open(t, d.dsn(t), WithAutoMigrate())
			ms := schema.Migrations(d.name)
			if v, err := b.SchemaVersion(testCtx(t)); err != nil || v != int64(ms[len(ms)-1].Version) || v < schema.LatestVersion { // every migration
				t.Fatalf("SchemaVersion after Open(WithAutoMigrate) = %d, %v", v, err)
			}
			if b.Dialect() != d.name || b.MigrationPath() != d.name+"/0001_init.sql" {
				t.Fatalf("Dialect() = %q, MigrationPath() = %q", b.Dialect(), b.MigrationPath())
			}
			grant(t, b, openSession(t, b, longTTL), "auto")
		})
	}
}

// unreachable are DSNs of servers that do not answer (port 1 refuses connections).
var unreachable = []string{
	"postgres://u:secret@127.0.0.1:1/db?connect_timeout=2",
	"mysql://u:secret@127.0.0.1:1/db?timeout=2s",
}

// TestInvalidInputsFailBeforeIO: names, TTLs and owners are checked before any I/O (the
// backends here cannot reach their servers).
func TestInvalidInputsFailBeforeIO(t *testing.T) {
	for _, dsn := range append(unreachable, "sqlite:///nonexistent-dir-"+unique(t)+"/x.db") {
		b := open(t, dsn)
		ctx := testCtx(t)
		for _, name := range []string{"", ".", "..", "a/b", "with space", strings.Repeat("x", 129), "é"} {
			if _, err := b.Acquire(ctx, "s", name); !errors.Is(err, spi.ErrInvalidName) {
				t.Errorf("%s: Acquire(%q) = %v, want ErrInvalidName", b.Dialect(), name, err)
			}
			if err := b.Release(ctx, "s", name, 1); !errors.Is(err, spi.ErrInvalidName) {
				t.Errorf("%s: Release(%q) = %v, want ErrInvalidName", b.Dialect(), name, err)
			}
			if _, err := b.Join(ctx, "s", name); !errors.Is(err, spi.ErrInvalidName) {
				t.Errorf("%s: Join(%q) = %v, want ErrInvalidName", b.Dialect(), name, err)
			}
			if _, err := b.Leave(ctx, "s", name); !errors.Is(err, spi.ErrInvalidName) {
				t.Errorf("%s: Leave(%q) = %v, want ErrInvalidName", b.Dialect(), name, err)
			}
			if _, err := b.Members(ctx, name); !errors.Is(err, spi.ErrInvalidName) {
				t.Errorf("%s: Members(%q) = %v, want ErrInvalidName", b.Dialect(), name, err)
			}
			if _, err := b.KeepAlive(ctx, "s", nil, []string{"ok", name}); !errors.Is(err, spi.ErrInvalidName) {
				t.Errorf("%s: KeepAlive(groups %q) = %v, want ErrInvalidName", b.Dialect(), name, err)
			}
		}
		for _, ttl := range []time.Duration{0, -time.Second, time.Microsecond} {
			if _, err := b.OpenSession(ctx, "o", ttl); !errors.Is(err, spi.ErrInvalidOption) {
				t.Errorf("%s: OpenSession(ttl %v) = %v, want ErrInvalidOption", b.Dialect(), ttl, err)
			}
		}
		for _, owner := range []string{strings.Repeat("o", MaxOwnerLen+1), "\xff"} {
			if _, err := b.OpenSession(ctx, owner, time.Second); !errors.Is(err, spi.ErrInvalidOption) {
				t.Errorf("%s: OpenSession(owner %q) = %v, want ErrInvalidOption", b.Dialect(), owner, err)
			}
		}
	}
}

// TestUnreachableServerIsRetryable: a server that does not answer is ErrUnavailable (retryable),
// and the password never shows in the error.
func TestUnreachableServerIsRetryable(t *testing.T) {
	for _, dsn := range unreachable {
		b := open(t, dsn)
		_, err := b.OpenSession(testCtx(t), "o", time.Second)
		if !errors.Is(err, spi.ErrUnavailable) || spi.Classify(err) != spi.Retryable {
			t.Errorf("%s: OpenSession against a closed port = %v, want ErrUnavailable", b.Dialect(), err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error shows the password: %v", b.Dialect(), err)
		}
	}
	// A SQLite file that cannot be created is a permanent error, not a retry loop.
	b := open(t, "sqlite:///nonexistent-dir-"+unique(t)+"/x.db")
	if _, err := b.OpenSession(testCtx(t), "o", time.Second); err == nil || spi.Classify(err) != spi.Permanent {
		t.Errorf("sqlite in a missing directory: %v (%v), want a permanent error", err, spi.Classify(err))
	}
}

func TestOpenRejectsBadDSNs(t *testing.T) {
	for _, dsn := range []string{
		"",
		"localhost:5432",
		"oracle://u:secret@h/db",
		"u:secret://x@h/db",
		"host=h password=secret",
		"u:secret@tcp(h:3306)/db",
		"sqlite:///x.db?password=secret&mode=memory",
		"postgres://u:secret@h:notaport/db",
		"mysql://u:secret@h:3306",
		"mysql://u:secret@h:3306/",
		"mysql://u:secret@h:3306/a/b",
		"mysql://u:secret@/db",
		"mysql://u:secret@h/db?tls=nosuchconfig",
		"mysql://u:secret@h/db?%zz",
		"sqlite://",
		"sqlite://:memory:",
		"sqlite://file::memory:?cache=shared",
		"sqlite://x.db?mode=memory",
		"sqlite://x.db?%zz",
		"mysql://u:secret@h/db?timeout=-1s",
		"mysql://u:secret@h/db?timeout=1s&timeout=-1s",
		"mysql://u:secret@h/db?readTimeout=-5ms",
		"mysql://u:secret@h/db?writeTimeout=-1h",
		"mysql://u:secret@h/db?timeTruncate=-1h",
		"mysql://u:secret@h/db?maxAllowedPacket=-1",
		"sqlite://x.db?_pragma=foo",
		"sqlite://x.db?_pragma=foo(1)",
		"sqlite://x.db?_pragma=foreign_key(1)",
		"sqlite://x.db?_pragma=foreign_keys",
		"sqlite://x.db?_pragma=foreign_keys()",
		"sqlite://x.db?_pragma=busy_timeout(1",
		"sqlite://x.db?_pragma=key('secret')",
		"sqlite://x.db?_pragma=busy_timeout(1);drop%20table%20x",
		"sqlite://x.db?_pragma=integrity_check(1)",
		"sqlite://x.db?jurnal_mode=wal",
		"sqlite://x.db?_pragam=busy_timeout(500)",
		"sqlite://x.db?_busy_timeout=500",
		"sqlite://x.db?_journal_mode=DELETE",
		"sqlite://x.db?_pragma=busy_timeout(500)&Mode=ro",
	} {
		b, err := Open(testCtx(t), dsn)
		if err == nil {
			b.Close()
			t.Errorf("Open(%q) succeeded", dsn)
			continue
		}
		if !errors.Is(err, spi.ErrInvalidOption) {
			t.Errorf("Open(%q) = %v, want ErrInvalidOption", dsn, err)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q) error shows the password: %v", dsn, err)
		}
	}
}

func TestMySQLConfigTranslatesTheURL(t *testing.T) {
	cfg, err := MySQLConfig("mysql://app:p%40ss%3Aw@db.example:3307/simba?tls=skip-verify&readTimeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "app" || cfg.Passwd != "p@ss:w" || cfg.Net != "tcp" || cfg.Addr != "db.example:3307" ||
		cfg.DBName != "simba" || cfg.TLSConfig != "skip-verify" || cfg.ReadTimeout != 5*time.Second || !cfg.InterpolateParams {
		t.Fatalf("MySQLConfig = %+v", cfg)
	}
	cfg, err = MySQLConfig("mysql://root@[::1]/simba?interpolateParams=false")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != "[::1]:3306" || cfg.User != "root" || cfg.Passwd != "" || cfg.InterpolateParams {
		t.Fatalf("MySQLConfig (default port, explicit interpolateParams) = %+v", cfg)
	}
	// The translation round-trips through go-sql-driver's own DSN form.
	if _, err := mysqldriver.ParseDSN(cfg.FormatDSN()); err != nil {
		t.Fatal(err)
	}
}

func TestSQLiteDSNAddsTheSessionSetup(t *testing.T) {
	got, err := SQLiteDSN("sqlite:///var/lib/app/simba.db")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"file:/var/lib/app/simba.db?", "busy_timeout%2810000%29", "foreign_keys%281%29", "journal_mode%28wal%29"} {
		if !strings.Contains(got, want) {
			t.Errorf("SQLiteDSN = %q, missing %q", got, want)
		}
	}
	got, err = SQLiteDSN("sqlite://rel/simba.db?_pragma=journal_mode(delete)&_pragma=busy_timeout(500)")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "file:rel/simba.db?") || strings.Contains(got, "wal") || strings.Contains(got, "10000") || !strings.Contains(got, "foreign_keys") {
		t.Errorf("SQLiteDSN with the user's pragmas = %q", got)
	}
	// SQLite's and the driver's own parameters pass (an unknown one is refused: TestOpenRejectsBadDSNs).
	if _, err := SQLiteDSN("sqlite://x.db?mode=rw&cache=shared&_txlock=immediate&_time_format=sqlite&vfs=unix"); err != nil {
		t.Errorf("SQLiteDSN with known parameters: %v", err)
	}
}

// TestUserPools: NewPostgres, NewMySQL and NewSQLite work on pools the user opened (the SQLite
// one without any DSN parameter: the backend runs the session setup itself), and Close leaves the
// pools open.
func TestUserPools(t *testing.T) {
	use := func(t *testing.T, b *Backend) {
		t.Helper()
		if err := b.Migrate(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		s := openSession(t, b, longTTL)
		name := "user-pool-" + unique(t)
		tok := grant(t, b, s, name)
		ka, err := b.KeepAlive(testCtx(t), s, []string{name}, nil)
		if err != nil || ka.Expired || len(ka.Held) != 1 || ka.Held[0] != (spi.Held{Name: name, Token: tok}) {
			t.Fatalf("KeepAlive = %+v, %v", ka, err)
		}
		if err := b.Release(testCtx(t), s, name, tok); err != nil {
			t.Fatal(err)
		}
		if err := b.CloseSession(testCtx(t), s); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := b.OpenSession(testCtx(t), "o", time.Second); !errors.Is(err, spi.ErrBackendClosed) {
			t.Fatalf("OpenSession after Close = %v, want ErrBackendClosed", err)
		}
	}
	t.Run("postgres", func(t *testing.T) {
		cfg, err := pgxpool.ParseConfig(pgDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		cfg.AfterConnect = PostgresAfterConnect
		pool, err := pgxpool.NewWithConfig(testCtx(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		b, err := NewPostgres(pool)
		if err != nil {
			t.Fatal(err)
		}
		use(t, b)
		if err := pool.Ping(testCtx(t)); err != nil {
			t.Fatalf("the user's pool was closed: %v", err)
		}
	})
	t.Run("mysql", func(t *testing.T) {
		cfg, err := MySQLConfig(myDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		cfg.InterpolateParams = false // the user's choice: prepared statements
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		b, err := NewMySQL(db)
		if err != nil {
			t.Fatal(err)
		}
		use(t, b)
		if err := db.PingContext(testCtx(t)); err != nil {
			t.Fatalf("the user's pool was closed: %v", err)
		}
	})
	t.Run("sqlite", func(t *testing.T) {
		db, err := sql.Open("sqlite", t.TempDir()+"/user.db")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		b, err := NewSQLite(db)
		if err != nil {
			t.Fatal(err)
		}
		// Every connection the backend uses gets the session setup, however many there are.
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := b.d.(*stdDialect).conn(testCtx(t))
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				var fk, busy int
				if err := c.QueryRowContext(testCtx(t), "PRAGMA foreign_keys").Scan(&fk); err != nil {
					t.Error(err)
				}
				if err := c.QueryRowContext(testCtx(t), "PRAGMA busy_timeout").Scan(&busy); err != nil {
					t.Error(err)
				}
				if fk != 1 || busy != 10000 {
					t.Errorf("connection has foreign_keys=%d busy_timeout=%d, want 1 and 10000", fk, busy)
				}
				time.Sleep(20 * time.Millisecond) // hold it so that the others get new connections
			}()
		}
		wg.Wait()
		use(t, b)
		if err := db.PingContext(testCtx(t)); err != nil {
			t.Fatalf("the user's pool was closed: %v", err)
		}
	})
	for _, f := range []func() error{
		func() error { _, err := NewPostgres(nil); return err },
		func() error { _, err := NewMySQL(nil); return err },
		func() error { _, err := NewSQLite(nil); return err },
	} {
		if err := f(); !errors.Is(err, spi.ErrInvalidOption) {
			t.Errorf("New* with a nil pool = %v, want ErrInvalidOption", err)
		}
	}
}

// TestHousekeeping: expired memberships and expired sessions without leases are deleted; the
// session of an expired holder stays (its lease row keeps pointing at it) and lease rows are
// never deleted; the background run does the same.
func TestHousekeeping(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			dsn := d.dsn(t)
			b := migrated(t, dsn, WithHousekeepingInterval(-1))
			ctx := testCtx(t)
			p := unique(t)
			holder, idle, alive := openSession(t, b, longTTL), openSession(t, b, longTTL), openSession(t, b, longTTL)
			name, group := "hk-"+p, "hkg-"+p
			tok := grant(t, b, holder, name)
			for _, s := range []spi.SessionID{holder, idle, alive} {
				if st, err := b.Join(ctx, s, group); err != nil || st != spi.OK {
					t.Fatalf("Join = %v, %v", st, err)
				}
			}
			expire(t, b, holder)
			expire(t, b, idle)
			if err := b.Housekeeping(ctx); err != nil {
				t.Fatal(err)
			}
			count := func(table, where string, arg any) int {
				t.Helper()
				q := "SELECT count(*) FROM " + table + " WHERE " + where
				var n int
				var err error
				switch dd := b.d.(type) {
				case *pgDialect:
					err = dd.pool.QueryRow(ctx, strings.Replace(q, "?", "$1", 1), arg).Scan(&n)
				case *stdDialect:
					err = dd.db.QueryRowContext(ctx, q, arg).Scan(&n)
				}
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			if n := count("simba_member", "group_name = ?", group); n != 1 {
				t.Errorf("%d memberships left, want 1 (the live session's)", n)
			}
			if count("simba_session", "id = ?", string(idle)) != 0 {
				t.Error("the expired session without a lease was not deleted")
			}
			if count("simba_session", "id = ?", string(holder)) != 1 {
				t.Error("the expired session holding a lease was deleted")
			}
			if count("simba_session", "id = ?", string(alive)) != 1 {
				t.Error("the live session was deleted")
			}
			if count("simba_lease", "name = ?", name) != 1 {
				t.Error("a lease row was deleted")
			}
			// A takeover frees the holder's session row for the next run; the token grows.
			if tok2 := grant(t, b, alive, name); tok2 <= tok {
				t.Fatalf("takeover token %d after %d", tok2, tok)
			}
			if err := b.Release(ctx, alive, name, tok+1); err != nil {
				t.Fatal(err)
			}
			// The background run (another client's backend) deletes the holder's row now.
			bg := open(t, dsn, WithHousekeepingInterval(50*time.Millisecond))
			deadline := time.Now().Add(20 * time.Second)
			for count("simba_session", "id = ?", string(holder)) != 0 {
				if time.Now().After(deadline) {
					t.Fatal("background housekeeping did not delete the expired session")
				}
				time.Sleep(20 * time.Millisecond)
			}
			bg.Close()
			if count("simba_lease", "name = ?", name) != 1 {
				t.Error("a lease row was deleted")
			}
			if m, err := b.Members(ctx, group); err != nil || len(m) != 1 || m[0] != alive {
				t.Errorf("Members = %v, %v; want [%s]", m, err, alive)
			}
		})
	}
}

// TestInspect: the snapshot lists leases (an expired holder's lease as free), live sessions and
// groups.
func TestInspect(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			b := migrated(t, d.dsn(t))
			ctx := testCtx(t)
			s1, err := b.OpenSession(ctx, "owner-one", longTTL)
			if err != nil {
				t.Fatal(err)
			}
			s2 := openSession(t, b, longTTL)
			tok := grant(t, b, s1.ID, "held")
			expTok := grant(t, b, s2, "expired")
			if _, err := b.Join(ctx, s1.ID, "g"); err != nil {
				t.Fatal(err)
			}
			expire(t, b, s2)
			snap, err := b.Inspect(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Leases) != 2 {
				t.Fatalf("leases %+v", snap.Leases)
			}
			exp, held := snap.Leases[0], snap.Leases[1]
			if exp.Name != "expired" || exp.Holder != "" || exp.Token != expTok {
				t.Errorf("expired holder's lease = %+v, want free with token %d", exp, expTok)
			}
			if held.Name != "held" || held.Holder != s1.ID || held.Owner != "owner-one" || held.Token != tok ||
				held.Remaining <= 0 || held.Remaining > longTTL {
				t.Errorf("held lease = %+v", held)
			}
			if len(snap.Sessions) != 1 || snap.Sessions[0].ID != s1.ID || snap.Sessions[0].Owner != "owner-one" {
				t.Errorf("sessions = %+v, want only %s", snap.Sessions, s1.ID)
			}
			if fmt.Sprint(snap.Groups) != fmt.Sprintf("map[g:[%s]]", s1.ID) {
				t.Errorf("groups = %v", snap.Groups)
			}
		})
	}
}

// TestSessionExpiryFollowsTheDatabaseClock: the stored expiry is the database clock plus the
// TTL, and connections in different time zones (MySQL time_zone, PostgreSQL TimeZone) agree on
// every remaining time. The client clock is not an input anywhere (the TCK jumps it by ±1 h).
func TestSessionExpiryFollowsTheDatabaseClock(t *testing.T) {
	zoned := map[string][2]string{
		"postgres": {"timezone", "Pacific/Kiritimati"},
		"mysql":    {"time_zone", "'-09:30'"},
	}
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			dsn := d.dsn(t)
			b := migrated(t, dsn)
			other := b
			if z, ok := zoned[d.name]; ok {
				other = open(t, withParam(t, dsn, z[0], z[1]))
			}
			ctx := testCtx(t)
			const ttl = 20 * time.Second
			s, err := other.OpenSession(ctx, "zoned", ttl)
			if err != nil {
				t.Fatal(err)
			}
			now, err := b.DatabaseNow(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if skew := time.Since(time.UnixMilli(now)); skew > time.Minute || skew < -time.Minute {
				t.Logf("database clock is %v off this host's (fine: only the database clock counts)", skew)
			}
			name := "clock-" + unique(t)
			grant(t, other, s.ID, name)
			watcher := openSession(t, b, ttl)
			r, err := b.Acquire(ctx, watcher, name)
			if err != nil || r.Kind != spi.HeldBy || r.Holder != s.ID {
				t.Fatalf("Acquire by another session = %+v, %v", r, err)
			}
			if r.Remaining > ttl || r.Remaining < ttl-5*time.Second {
				t.Fatalf("holder's remaining seen from another time zone = %v, want about %v", r.Remaining, ttl)
			}
			// Expiry is when the database clock passes the stored expiry: move the expiry to the
			// database's now and the holder is expired for everyone, whatever the client clocks.
			expire(t, b, s.ID)
			if r, err := b.Acquire(ctx, watcher, name); err != nil || r.Kind != spi.Granted {
				t.Fatalf("Acquire after the holder's expiry = %+v, %v", r, err)
			}
			if ka, err := other.KeepAlive(ctx, s.ID, nil, nil); err != nil || !ka.Expired {
				t.Fatalf("KeepAlive of the expired session = %+v, %v", ka, err)
			}
		})
	}
}

// TestPostgresHintsReconnect: the hint listener gets the releases, by other clients, of the
// names its backend's sessions wait for, and after its connection is killed it reconnects,
// LISTENs on their channels again and gets them again.
func TestPostgresHintsReconnect(t *testing.T) {
	dsn := pgDSN(t)
	b := migrated(t, withParam(t, dsn, "application_name", "simba-hints-"+unique(t)))
	other := migrated(t, dsn)
	heard := hearing(b)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	hints, err := b.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hub := &b.d.(*pgDialect).hub
	waitListening := func() {
		t.Helper()
		select {
		case <-hub.listening:
		case <-time.After(30 * time.Second):
			t.Fatal("the listener did not (re)connect")
		}
	}
	waitListening()
	s := openSession(t, other, longTTL)
	waiter := openSession(t, b, longTTL)
	// releaseAndSee: a session of b waits for name (so the listener LISTENs on its channel);
	// other's holder releases it; the listener hears the server's notification (not only the
	// hint that follows its LISTEN) and delivers a Released hint.
	releaseAndSee := func(name string, held ...int64) {
		t.Helper()
		var tok int64
		if len(held) == 0 {
			tok = grant(t, other, s, name)
			if r, err := b.Acquire(testCtx(t), waiter, name); err != nil || r.Kind != spi.HeldBy {
				t.Fatalf("Acquire = %+v, %v; want HeldBy", r, err)
			}
			waitListening()
		} else {
			tok = held[0]
		}
		if err := other.Release(testCtx(t), s, name, tok); err != nil {
			t.Fatal(err)
		}
		timeout := time.After(30 * time.Second)
		for heardIt := false; !heardIt; {
			select {
			case n := <-heard:
				heardIt = n.payload == name
			case <-timeout:
				t.Fatalf("no notification of %s's release", name)
			}
		}
		for {
			select {
			case h, ok := <-hints:
				if !ok {
					t.Fatal("hint channel closed")
				}
				if h.Kind == spi.Released && h.Name == name {
					return
				}
			case <-timeout:
				t.Fatalf("no released hint for %s", name)
			}
		}
	}
	before, after := "before-"+unique(t), "after-"+unique(t)
	releaseAndSee(before)
	// A session of b waits for after before the kill: the new connection LISTENs on its
	// channel again.
	tok := grant(t, other, s, after)
	if r, err := b.Acquire(testCtx(t), waiter, after); err != nil || r.Kind != spi.HeldBy {
		t.Fatalf("Acquire = %+v, %v; want HeldBy", r, err)
	}
	waitListening()
	// Kill the listener's connection from the server side.
	app := b.d.(*pgDialect).pool.Config().ConnConfig.RuntimeParams["application_name"]
	exec(t, other, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ? AND query LIKE '%LISTEN%'", app)
	waitListening()
	releaseAndSee(after, tok)
	// A join of a group a session of b is a member of shows as a GroupChanged hint, from the
	// server's notification on the group's own channel.
	g := "hint-group-" + unique(t)
	join(t, b, waiter, g)
	hinted(t, hints, spi.Hint{Kind: spi.GroupChanged, Name: g}) // the LISTEN's catch-up hint
	join(t, other, s, g)
	heardOn(t, heard, wire.SQLGroupOwnChannel(g), g)
	hinted(t, hints, spi.Hint{Kind: spi.GroupChanged, Name: g})
	cancel()
	for range hints { // drains until closed
	}
}

// TestHintsWithoutPushCloseWithContext: MySQL and SQLite deliver no hints; the channel closes
// with the context and with Close.
func TestHintsWithoutPushCloseWithContext(t *testing.T) {
	b := open(t, liteDSN(t))
	if b.PushesHints() {
		t.Fatal("SQLite claims to push hints")
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := b.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, ok := <-ch; ok {
		t.Fatal("a hint on SQLite")
	}
	ch, err = b.Hints(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if _, ok := <-ch; ok {
		t.Fatal("a hint on SQLite")
	}
	if _, err := b.Hints(context.Background()); !errors.Is(err, spi.ErrBackendClosed) {
		t.Fatalf("Hints after Close = %v", err)
	}
}

// TestErrorClassification: deadlocks, serialization failures, lock timeouts and SQLITE_BUSY are
// retryable (ErrUnavailable); a missing table is ErrSchemaMissing naming the migration;
// authentication and syntax errors are permanent.
func TestErrorClassification(t *testing.T) {
	pg := &Backend{name: "postgres"}
	pgd := &pgDialect{b: pg}
	pg.d = pgd
	for code, want := range map[string]error{
		"40P01": spi.ErrUnavailable, "40001": spi.ErrUnavailable, "55P03": spi.ErrUnavailable,
		"08006": spi.ErrUnavailable, "57P01": spi.ErrUnavailable, "53300": spi.ErrUnavailable,
		"42P01": spi.ErrSchemaMissing, "42703": spi.ErrSchemaMissing,
	} {
		err := pg.fail("op", &pgconn.PgError{Code: code, Message: "m"})
		if !errors.Is(err, want) {
			t.Errorf("PostgreSQL %s: %v, want %v", code, err, want)
		}
	}
	for _, code := range []string{"28P01", "42501", "3D000", "42601"} {
		if err := pg.fail("op", &pgconn.PgError{Code: code}); spi.Classify(err) != spi.Permanent {
			t.Errorf("PostgreSQL %s: %v is not permanent", code, err)
		}
	}
	my := &Backend{name: "mysql"}
	my.d = &stdDialect{b: my, classifyErr: classifyMySQL}
	for num, want := range map[uint16]error{
		1213: spi.ErrUnavailable, 1205: spi.ErrUnavailable, 1040: spi.ErrUnavailable, 2013: spi.ErrUnavailable,
		1146: spi.ErrSchemaMissing, 1054: spi.ErrSchemaMissing,
	} {
		err := my.fail("op", &mysqldriver.MySQLError{Number: num, Message: "m"})
		if !errors.Is(err, want) {
			t.Errorf("MySQL %d: %v, want %v", num, err, want)
		}
		if want == spi.ErrSchemaMissing && !strings.Contains(err.Error(), "sql/schema/mysql/0001_init.sql") {
			t.Errorf("MySQL %d: %v does not name the migration", num, err)
		}
	}
	for _, num := range []uint16{1045, 1044, 1049, 1064, 1142} {
		if err := my.fail("op", &mysqldriver.MySQLError{Number: num}); spi.Classify(err) != spi.Permanent {
			t.Errorf("MySQL %d: %v is not permanent", num, err)
		}
	}
	if err := my.fail("op", mysqldriver.ErrInvalidConn); !errors.Is(err, spi.ErrUnavailable) {
		t.Errorf("invalid connection: %v", err)
	}
	if err := my.fail("op", context.DeadlineExceeded); !errors.Is(err, spi.ErrUnavailable) {
		t.Errorf("deadline: %v", err)
	}
	if err := my.fail("op", context.Canceled); spi.Classify(err) != spi.Permanent || !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}

	// A real SQLITE_BUSY: another connection holds the write lock and this one does not wait.
	dsn := liteDSN(t)
	b := migrated(t, dsn)
	db, err := sql.Open("sqlite", strings.TrimPrefix(dsn, "sqlite://"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := testCtx(t)
	c1, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	c2, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c1.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer c1.ExecContext(ctx, "ROLLBACK")
	_, busy := c2.ExecContext(ctx, "BEGIN IMMEDIATE")
	if busy == nil {
		t.Fatal("a second writer got the write lock")
	}
	if err := b.fail("op", busy); !errors.Is(err, spi.ErrUnavailable) {
		t.Errorf("SQLITE_BUSY: %v, want ErrUnavailable", err)
	}
	_, missing := c2.ExecContext(ctx, "SELECT * FROM simba_nonexistent")
	if err := b.fail("op", missing); !errors.Is(err, spi.ErrSchemaMissing) || !strings.Contains(err.Error(), "sql/schema/sqlite/0001_init.sql") {
		t.Errorf("no such table: %v, want ErrSchemaMissing naming the migration", err)
	}
}

// TestKeepAliveMembersRemaining: a keep-alive tells, per group, the least time left among the
// other members' sessions (the caller's own is left out), so the client can read the members
// when the first of them expires (no NOTIFY tells an expiry); a group with no other member has
// no entry.
func TestKeepAliveMembersRemaining(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			b := migrated(t, d.dsn(t))
			ctx := testCtx(t)
			g, alone := "ka-rem-"+unique(t), "ka-alone-"+unique(t)
			sess := func(ttl time.Duration) spi.SessionID {
				s, err := b.OpenSession(ctx, "o", ttl)
				if err != nil {
					t.Fatal(err)
				}
				return s.ID
			}
			me := sess(longTTL)
			opened := time.Now() // before the short session opens: its expiry is at most 5 s after
			short, long := sess(5*time.Second), sess(longTTL)
			for _, s := range []spi.SessionID{me, short, long} {
				if st, err := b.Join(ctx, s, g); err != nil || st != spi.OK {
					t.Fatalf("Join(%s) = %v, %v", s, st, err)
				}
			}
			if st, err := b.Join(ctx, me, alone); err != nil || st != spi.OK {
				t.Fatalf("Join = %v, %v", st, err)
			}
			ka, err := b.KeepAlive(ctx, me, nil, []string{g, alone})
			if err != nil {
				t.Fatal(err)
			}
			if len(ka.Members[g]) != 3 || len(ka.Members[alone]) != 1 {
				t.Fatalf("Members = %v", ka.Members)
			}
			// The 5 s session's time left: no more than 5 s, and no less than 5 s minus the time
			// since just before it opened (the database counts whole milliseconds: 2 ms of slack).
			// A fixed floor (4 s) failed whenever the calls in between took a second on a loaded
			// machine.
			if r, ok := ka.MembersRemaining[g]; !ok || r < 5*time.Second-time.Since(opened)-2*time.Millisecond || r > 5*time.Second {
				t.Errorf("MembersRemaining[%s] = %v, %v; want the 5 s session's time left (%v since it opened)", g, r, ok, time.Since(opened))
			}
			if r, ok := ka.MembersRemaining[alone]; ok {
				t.Errorf("MembersRemaining[%s] = %v for a group with no other member", alone, r)
			}
			// The short session expires: it leaves the view, and the least is the long one's.
			expire(t, b, short)
			if ka, err = b.KeepAlive(ctx, me, nil, []string{g}); err != nil {
				t.Fatal(err)
			}
			if len(ka.Members[g]) != 2 {
				t.Fatalf("Members = %v after the expiry", ka.Members)
			}
			if r := ka.MembersRemaining[g]; r <= longTTL-5*time.Second || r > longTTL {
				t.Errorf("MembersRemaining[%s] = %v after the expiry; want the long session's", g, r)
			}
		})
	}
}

// TestDSNErrorsNameTheParameter: a DSN parameter the driver would take without a word but
// that cannot do what its writer meant (a negative MySQL timeout or timeTruncate, a
// maxAllowedPacket outside the server's range, a SQLite pragma SQLite does
// not know or a pragma without a value) is refused with a message naming it.
func TestDSNErrorsNameTheParameter(t *testing.T) {
	for _, c := range []struct{ dsn, want string }{
		{"mysql://u@h/db?timeout=-1s", `timeout="-1s" is negative`},
		{"mysql://u@h/db?timeout=1s&timeout=-2s", `timeout="-2s" is negative`},
		{"mysql://u@h/db?readTimeout=-5ms", `readTimeout="-5ms" is negative`},
		{"mysql://u@h/db?writeTimeout=-1h", `writeTimeout="-1h" is negative`},
		{"mysql://u@h/db?timeTruncate=-1s", `timeTruncate="-1s" is negative`},
		{"mysql://u@h/db?maxAllowedPacket=-1", `maxAllowedPacket="-1" is out of range`},
		{"mysql://u@h/db?maxAllowedPacket=12", `maxAllowedPacket="12" is out of range`},
		{"mysql://u@h/db?maxAllowedPacket=4294967296", `maxAllowedPacket="4294967296" is out of range`},
		{"sqlite://x.db?_pragma=foo", `unknown pragma "foo"`},
		{"sqlite://x.db?_pragma=Foreign_Key(1)", `unknown pragma "Foreign_Key"`},
		{"sqlite://x.db?_pragma=key('s3cr3t')", `unknown pragma "key"`},
		{"sqlite://x.db?_pragma=foreign_keys", `want foreign_keys(value)`},
		{"sqlite://x.db?_pragma=main.journal_mode(wal)", `_pragma: want name(value)`},
	} {
		b, err := Open(testCtx(t), c.dsn)
		if err == nil {
			b.Close()
			t.Errorf("Open(%q) succeeded", c.dsn)
			continue
		}
		if !errors.Is(err, spi.ErrInvalidOption) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%q) = %v, want ErrInvalidOption saying %s", c.dsn, err, c.want)
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("Open(%q) error shows the key: %v", c.dsn, err)
		}
	}
	// What is meant is still taken: zero timeouts, pragmas in either form, in any case.
	if _, err := MySQLConfig("mysql://u@h/db?timeout=0&readTimeout=0s&writeTimeout=2s"); err != nil {
		t.Errorf("MySQLConfig with zero timeouts: %v", err)
	}
	for _, q := range []string{"maxAllowedPacket=0", "maxAllowedPacket=1024", "maxAllowedPacket=1073741824", "timeTruncate=0", "timeTruncate=1ms"} {
		if _, err := MySQLConfig("mysql://u@h/db?" + q); err != nil {
			t.Errorf("MySQLConfig with %s: %v", q, err)
		}
	}
	if _, err := SQLiteDSN("sqlite://x.db?_pragma=Journal_Mode(DELETE)&_pragma=busy_timeout%20=%20500&_pragma=%20synchronous(normal)%20"); err != nil {
		t.Errorf("SQLiteDSN with pragmas in both forms: %v", err)
	}
}

// TestSQLitePragmasAreKnown: every pragma a DSN may set is one the linked SQLite knows, so
// that the list refuses only what SQLite would ignore.
func TestSQLitePragmasAreKnown(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+t.TempDir()+"/p.db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT name FROM pragma_pragma_list")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	known := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		known[n] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(known) == 0 {
		t.Fatal("pragma_list is empty")
	}
	for p := range sqlitePragmas {
		if !known[p] {
			t.Errorf("pragma %q is not in this SQLite's pragma_list", p)
		}
	}
}
