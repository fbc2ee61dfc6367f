package sql_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite"

	"github.com/simba-go/simba"
	simbasql "github.com/simba-go/simba/backend/sql"
)

// A SQLite file needs no server: two sessions (as two processes on one host would) contend for
// one lease.
func Example() {
	dir, err := os.MkdirTemp("", "simba-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	b, err := simbasql.Open(ctx, "sqlite://"+filepath.Join(dir, "simba.db"), simbasql.WithAutoMigrate())
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	alice, _ := b.OpenSession(ctx, "alice", 15*time.Second)
	bob, _ := b.OpenSession(ctx, "bob", 15*time.Second)

	// Tokens are microsecond-scale numbers (at least the database clock in µs), not 1, 2, 3:
	// only their order matters.
	r, _ := b.Acquire(ctx, alice.ID, "orders")
	fmt.Println("alice:", r.Kind, "token > 0:", r.Token > 0)
	r2, _ := b.Acquire(ctx, bob.ID, "orders")
	fmt.Println("bob:", r2.Kind, r2.HolderOwner)

	_ = b.Release(ctx, alice.ID, "orders", r.Token)
	r3, _ := b.Acquire(ctx, bob.ID, "orders")
	fmt.Println("bob:", r3.Kind, "token greater than alice's:", r3.Token > r.Token)
	// Output:
	// alice: granted token > 0: true
	// bob: held-by alice
	// bob: granted token greater than alice's: true
}

// A distributed lock through a simba.Client on a SQLite file.
func Example_lock() {
	dir, err := os.MkdirTemp("", "simba-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	b, err := simbasql.Open(ctx, "sqlite://"+filepath.Join(dir, "simba.db"), simbasql.WithAutoMigrate())
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	client, err := simba.New(b, simba.WithOwner("reporter"))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)

	err = client.WithLock(ctx, "nightly-report", func(ctx context.Context, t simba.Term) error {
		// Pass t.Token() to the resource; it is a µs-scale number, only its order matters.
		fmt.Println("holding", t.Name(), "with a fencing token:", t.Token() > 0)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// holding nightly-report with a fencing token: true
}

// Migrate applies the embedded schema (idempotent; safe from several clients at once), as the
// `simba migrate` command does.
func ExampleBackend_Migrate() {
	ctx := context.Background()
	b, err := simbasql.Open(ctx, "postgres://simba@db.internal:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	if err := b.Migrate(ctx); err != nil {
		log.Fatal(err) // e.g. permission denied to create tables
	}
}

// NewPostgres on your own pool: build its configuration with PostgresPoolConfig, which gives it
// what Open's pool has (READ COMMITTED through PostgresAfterConnect, a connect timeout, the
// bounds on a connection's connect and cleanup, and the DialFunc that lets a call that runs out
// of time discard the connections a silent link left), and change what you need. A pool made
// from pgxpool.ParseConfig has none of that: it lost the session to every blackhole of 0.2 to
// 1.2 s at TTL 3 s after a burst of calls, in an outside trial.
func ExampleNewPostgres() {
	ctx := context.Background()
	cfg, err := simbasql.PostgresPoolConfig(os.Getenv("DATABASE_URL")) // postgres://...
	if err != nil {
		log.Fatal(err)
	}
	cfg.MaxConns = 8 // keep (or wrap) DialFunc, AfterNetConnect, BeforeConnect and AfterConnect
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	b, err := simbasql.NewPostgres(pool) // b.Close leaves pool open
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	client, err := simba.New(b)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)
}

// NewMySQL on your own database/sql pool: make it on MySQLConnector, which gives it what Open's
// pool has against a silent link, and set the pool's limits as you like.
func ExampleMySQLConnector() {
	ctx := context.Background()
	cfg, err := simbasql.MySQLConfig("mysql://root@127.0.0.1:3306/test") // or your own *mysql.Config
	if err != nil {
		log.Fatal(err)
	}
	conn, err := simbasql.MySQLConnector(cfg)
	if err != nil {
		log.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	db.SetMaxOpenConns(16)
	b, err := simbasql.NewMySQL(db) // b.Close leaves db open
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	client, err := simba.New(b)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)
}

// NewSQLite on your own database/sql pool: no DSN parameters needed, the backend sets up every
// connection itself.
func ExampleNewSQLite() {
	db, err := sql.Open("sqlite", filepath.Join(os.TempDir(), "app-simba.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	b, err := simbasql.NewSQLite(db, simbasql.WithAutoMigrate())
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
}
