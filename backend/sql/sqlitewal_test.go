package sql

import (
	"crypto/sha256"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testenv"
	"github.com/simba-go/simba/spi"
)

// rawSQLite runs statements on file through the driver alone, as the sqlite3 shell or another
// program would (no pragma of Simba's), and returns its journal mode afterwards.
func rawSQLite(t *testing.T, file string, statements ...string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+file)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, st := range statements {
		if _, err := db.Exec(st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	return mode
}

// fileState is what a test compares before and after: the names in the directory and the
// database file's bytes.
func fileState(t *testing.T, file string) string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(filepath.Dir(file), "*"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return strings.Join(names, ",") + " " + string(sum[:])
}

// TestInspectLeavesTheSQLiteFileAsItIs: Inspect on a database in rollback-journal mode (as the
// sqlite3 shell makes them) leaves its journal mode, its bytes and its directory as they were;
// on a file without the schema it fails with ErrSchemaMissing naming the migration, and
// creates no table, even on a backend built WithAutoMigrate (NewSQLite: Open's migrates as it
// opens). Before, every connection of Open's pool ran PRAGMA journal_mode=wal as it opened, so
// simba status switched the file to WAL.
func TestInspectLeavesTheSQLiteFileAsItIs(t *testing.T) {
	ctx := testCtx(t)
	withSchema := filepath.Join(t.TempDir(), "with.db")
	migrated(t, "sqlite://"+withSchema, WithHousekeepingInterval(-1)).Close()
	os.Remove(withSchema + "-simba-gate")
	if mode := rawSQLite(t, withSchema, "PRAGMA journal_mode=delete"); mode != "delete" {
		t.Fatalf("journal mode %q after setting delete", mode)
	}
	bare := filepath.Join(t.TempDir(), "bare.db")
	if mode := rawSQLite(t, bare, "CREATE TABLE app (x)"); mode != "delete" {
		t.Fatalf("a new file's journal mode is %q, want delete", mode)
	}
	before, beforeBare := fileState(t, withSchema), fileState(t, bare)

	b := open(t, "sqlite://"+withSchema, WithHousekeepingInterval(-1))
	if _, err := b.Inspect(ctx); err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	b.Close()
	bb := open(t, "sqlite://"+bare, WithHousekeepingInterval(-1))
	_, err := bb.Inspect(ctx)
	if !errors.Is(err, spi.ErrSchemaMissing) || !strings.Contains(err.Error(), "0001_init.sql") {
		t.Errorf("Inspect of a file without the schema: %v, want ErrSchemaMissing naming the migration", err)
	}
	bb.Close()
	db, err := sql.Open("sqlite", "file:"+bare)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	auto, err := NewSQLite(db, WithAutoMigrate(), WithHousekeepingInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := auto.Inspect(ctx); !errors.Is(err, spi.ErrSchemaMissing) {
		t.Errorf("Inspect WithAutoMigrate of a file without the schema: %v, want ErrSchemaMissing", err)
	}
	auto.Close()
	db.Close()

	for file, was := range map[string]string{withSchema: before, bare: beforeBare} {
		if mode := rawSQLite(t, file); mode != "delete" {
			t.Errorf("Inspect switched %s to journal mode %q", filepath.Base(file), mode)
		}
		if now := fileState(t, file); now != was {
			t.Errorf("Inspect changed %s or its directory", filepath.Base(file))
		}
	}
	check, err := sql.Open("sqlite", "file:"+bare)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	var tables int
	if err := check.QueryRow("SELECT count(*) FROM sqlite_master").Scan(&tables); err != nil || tables != 1 {
		t.Errorf("%d objects in the file without the schema after Inspect (%v), want its one table", tables, err)
	}
}

// TestFirstWriteSwitchesToWAL: the first operation that may write puts Open's database in WAL
// mode: a new file silently, one that already held tables in another mode with a warning that
// names the mode and how to keep it; a DSN that sets journal_mode keeps it, without a word.
func TestFirstWriteSwitchesToWAL(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	var logs testenv.LogBuffer

	fresh := filepath.Join(dir, "fresh.db")
	b := open(t, "sqlite://"+fresh, WithAutoMigrate(), WithLogger(logs.Logger()), WithHousekeepingInterval(-1))
	if _, err := b.OpenSession(ctx, "a", 3*time.Second); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if mode := rawSQLite(t, fresh); mode != "wal" {
		t.Errorf("a new file is in journal mode %q after the first write, want wal", mode)
	}
	if logs.String() != "" {
		t.Errorf("logged for a new file: %s", logs.String())
	}

	rawSQLite(t, fresh, "PRAGMA journal_mode=delete")
	b = open(t, "sqlite://"+fresh, WithLogger(logs.Logger()), WithHousekeepingInterval(-1))
	if _, err := b.OpenSession(ctx, "a", 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := b.OpenSession(ctx, "b", 3*time.Second); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if mode := rawSQLite(t, fresh); mode != "wal" {
		t.Errorf("journal mode %q after the first write, want wal", mode)
	}
	if out := logs.String(); strings.Count(out, "level=WARN") != 1 || !strings.Contains(out, "from journal_mode delete to WAL") ||
		!strings.Contains(out, "_pragma=journal_mode(delete)") {
		t.Errorf("want one warning naming the old mode and how to keep it, got:\n%s", out)
	}

	rawSQLite(t, fresh, "PRAGMA journal_mode=delete")
	kept := open(t, "sqlite://"+fresh+"?_pragma=journal_mode(delete)", WithLogger(logs.Logger()), WithHousekeepingInterval(-1))
	if _, err := kept.OpenSession(ctx, "c", 3*time.Second); err != nil {
		t.Fatal(err)
	}
	kept.Close()
	if mode := rawSQLite(t, fresh); mode != "delete" {
		t.Errorf("journal mode %q with _pragma=journal_mode(delete) in the DSN, want delete", mode)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Errorf("%d warnings, want still 1:\n%s", n, logs.String())
	}
}
