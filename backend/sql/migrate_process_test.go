package sql

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/sqlitebusy"
	"github.com/simba-go/simba/internal/sqlitetest"
	"github.com/simba-go/simba/spi"
)

// migrateChildEnv makes the test binary a child of TestSQLiteMigrateAcrossProcesses: the
// variable holds "<mode>:<SQLite DSN>"; the child prints "ready", waits for a line on stdin,
// opens the DSN and prints "ok" or the error. Mode "migrate" opens it with WithAutoMigrate;
// mode "cli" does what `simba lock` does: WithAutoMigrate only if the file has no table yet,
// and otherwise expects the schema there (it opens a session).
const migrateChildEnv = "SIMBA_SQL_MIGRATE_CHILD"

// migrateChild runs the migrate child's part when the binary was started as one, and reports
// whether it did.
func migrateChild() bool {
	mode, dsn, _ := strings.Cut(os.Getenv(migrateChildEnv), ":")
	if dsn == "" {
		return false
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fail := func(err error) {
		fmt.Println(strings.ReplaceAll(err.Error(), "\n", " "))
		os.Exit(1)
	}
	var opts []Option
	if mode == "migrate" {
		opts = append(opts, WithAutoMigrate())
	} else {
		name, err := SQLiteDSN(dsn)
		if err != nil {
			fail(err)
		}
		db, err := sql.Open("sqlite", name)
		if err != nil {
			fail(err)
		}
		var objects int
		// The connection's journal_mode=wal (see migrateBusy), as the CLI's newSQLiteFile.
		err = sqlitebusy.Retry(ctx, func() error {
			return db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&objects)
		})
		if err != nil {
			fail(err)
		}
		db.Close()
		if objects == 0 {
			opts = append(opts, WithAutoMigrate())
		}
	}
	b, err := Open(ctx, dsn, opts...)
	if err != nil {
		fail(err)
	}
	// As a client does: a retryable error (SQLITE_BUSY) is tried again, a permanent one
	// (ErrSchemaMissing) is the answer.
	_, err = b.OpenSession(ctx, "migrate-child", time.Second)
	for err != nil && spi.Classify(err) == spi.Retryable && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
		_, err = b.OpenSession(ctx, "migrate-child", time.Second)
	}
	if err != nil {
		fail(err)
	}
	b.Close()
	fmt.Println("ok")
	os.Exit(0)
	return true
}

// TestSQLiteMigrateAcrossProcesses: processes that open one new SQLite file at once all
// succeed, whether each applies the schema (WithAutoMigrate, as the README's quick start does)
// or, as `simba lock` does, only when the file has no table yet. A new connection's PRAGMA
// journal_mode=wal can fail with SQLITE_BUSY at once, without waiting in the busy handler,
// while another process sets the file up, and Migrate returned that error (Open failing with
// "database is locked"); and Migrate applied each migration in a transaction of its own, so a
// process could find the tables there with an old version (ErrSchemaMissing, "run simba
// migrate").
func TestSQLiteMigrateAcrossProcesses(t *testing.T) {
	for _, mode := range []string{"migrate", "cli"} {
		t.Run(mode, func(t *testing.T) { testMigrateAcrossProcesses(t, mode) })
	}
}

func testMigrateAcrossProcesses(t *testing.T, mode string) {
	// -short runs fewer rounds of the same race (each round starts procs processes).
	const procs = 6
	rounds := 15
	if testing.Short() {
		rounds = 2
	}
	for r := range rounds {
		dsn := "sqlite://" + filepath.Join(t.TempDir(), "simba.db")
		type kid struct {
			in   io.WriteCloser
			out  *bufio.Reader
			wait func() error
		}
		var kids []kid
		for range procs {
			cmd, in, out := startChild(t, migrateChildEnv+"="+mode+":"+dsn)
			k := kid{in: in, out: bufio.NewReader(out), wait: cmd.Wait}
			if line, err := k.out.ReadString('\n'); err != nil || line != "ready\n" {
				t.Fatalf("child: %q, %v", line, err)
			}
			kids = append(kids, k)
		}
		for _, k := range kids {
			io.WriteString(k.in, "go\n")
		}
		for i, k := range kids {
			line, _ := k.out.ReadString('\n')
			k.in.Close()
			k.wait()
			if line != "ok\n" {
				t.Errorf("round %d, process %d: open a new file = %s", r, i, strings.TrimSpace(line))
			}
		}
		if t.Failed() {
			return
		}
	}
}

// TestSQLiteMigrateWaitsForAWriter: while another connection writes to a SQLite file not yet in
// WAL mode (another process setting the same new file up), the journal_mode=wal that Open puts
// in the DSN fails a new connection with SQLITE_BUSY at once, without the busy handler; Migrate
// tries again until the writer is done instead of returning "database is locked".
func TestSQLiteMigrateWaitsForAWriter(t *testing.T) {
	ctx := testCtx(t)
	path := filepath.Join(t.TempDir(), "busy.db")
	committed := sqlitetest.WriterOnNewFile(t, ctx, path, 300*time.Millisecond)
	b, err := Open(ctx, "sqlite://"+path, WithAutoMigrate())
	if err != nil {
		t.Errorf("Open(WithAutoMigrate) while another connection writes: %v", err)
	} else {
		b.Close()
	}
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
}
