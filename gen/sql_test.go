package gen

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRepositorySQLSpecCoversSPI: the repository's SQL spec has every SPI operation on every
// dialect, acquire and release are one statement on PostgreSQL (the benchmark target), and the
// multi-statement acquire and close run in a transaction elsewhere.
func TestRepositorySQLSpecCoversSPI(t *testing.T) {
	s, err := LoadSQL("../spec")
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]SQLOperationSpec{}
	for _, op := range s.Operations {
		ops[op.Name] = op
	}
	for _, name := range []string{"open_session", "keep_alive", "close_session", "acquire", "release",
		"join", "leave", "members", "housekeeping", "inspect", "schema_version"} {
		op, ok := ops[name]
		if !ok {
			t.Errorf("operation %s missing", name)
			continue
		}
		for _, d := range sqlDialects {
			steps := s.steps(op, d)
			if len(steps) == 0 {
				t.Errorf("%s has no statement on %s", name, d)
			}
			// The decision-making statements of acquire and close run in one transaction; a
			// step after a rare outcome (PostgreSQL acquire's waiter_remove after a grant to the
			// first waiter, which only deletes the grantee's own entry) may run on its own.
			unconditional := 0
			for _, e := range s.stepEntries(op, d) {
				if e.When == "" {
					unconditional++
				}
			}
			if unconditional > 1 && !slices.Contains(op.Transaction, d) && (name == "acquire" || name == "close_session") {
				t.Errorf("%s runs %d statements on %s outside a transaction", name, unconditional, d)
			}
		}
	}
	// On PostgreSQL acquire's usual path is one statement: any later step runs only after a
	// rare outcome (when), such as a grant to a session that was the first waiter.
	for _, name := range []string{"acquire", "release", "close_session"} {
		n := 0
		for _, e := range s.stepEntries(ops[name], "postgres") {
			if e.When == "" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s is %d unconditional statements on PostgreSQL, want 1", name, n)
		}
	}
}

// TestSQLMigrationStatements: the migration's statements carry no semicolons (drivers run them
// one per call) and create every table idempotently, with MySQL's indexes inline.
func TestSQLMigrationStatements(t *testing.T) {
	s, err := LoadSQL("../spec")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range sqlDialects {
		stmts := s.ddlStatements(d)
		creates := 0
		for _, st := range stmts {
			if strings.Contains(st, ";") {
				t.Errorf("%s: statement holds a semicolon: %q", d, st)
			}
			if strings.HasPrefix(st, "CREATE TABLE ") {
				creates++
				if !strings.HasPrefix(st, "CREATE TABLE IF NOT EXISTS ") {
					t.Errorf("%s: not idempotent: %q", d, st)
				}
			}
			if strings.HasPrefix(st, "CREATE INDEX") && (d == "mysql" || !strings.HasPrefix(st, "CREATE INDEX IF NOT EXISTS ")) {
				t.Errorf("%s: index statement %q", d, st)
			}
		}
		if creates != len(s.Tables) {
			t.Errorf("%s: %d CREATE TABLE statements for %d tables", d, creates, len(s.Tables))
		}
	}
}

func TestSQLDocLinesWrap(t *testing.T) {
	got := sqlDocLines(strings.Repeat("word ", 40) + "\nsecond paragraph")
	for _, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		if !strings.HasPrefix(line, "-- ") || len(line) > 100 {
			t.Errorf("bad doc line %q", line)
		}
	}
	if !strings.HasSuffix(got, "-- second paragraph\n") {
		t.Errorf("paragraph lost: %q", got)
	}
}

// TestRepositorySQLQUpToDate: the adapters step's output (generated/sqlq and the batch queue
// functions) matches the repository's spec and sqlc output, what make verify checks after go
// generate.
func TestRepositorySQLQUpToDate(t *testing.T) {
	files, err := GenerateSQLQ("..")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
		old, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(f.Path)))
		if err != nil || !bytes.Equal(old, f.Data) {
			t.Errorf("%s is out of date (run go generate ./...): %v", f.Path, err)
		}
	}
	for _, want := range []string{"generated/sqlq/sqlq.go", "generated/sqlq/postgres.go", "generated/sqlq/mysql.go", "generated/sqlq/sqlite.go", "generated/sqlc/postgres/simba_queue.go"} {
		if !slices.Contains(paths, want) {
			t.Errorf("the adapters step does not write %s", want)
		}
	}
}

// TestSQLLaterMigrations: the repository's lease schema splits into its migrations (the waiter
// table in 0003_waiters, the rest in 0001_init), the backends need the last one, and a table
// naming no declared migration or a version that does not increase is refused.
func TestSQLLaterMigrations(t *testing.T) {
	s, err := LoadSQL("../spec")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range s.leaseMigrations() {
		var names []string
		for _, tb := range m.Tables {
			names = append(names, tb.Name)
		}
		got = append(got, m.migrationFile()+": "+strings.Join(names, ","))
	}
	want := []string{
		"0001_init.sql: simba_schema_version,simba_session,simba_lease,simba_member",
		"0003_waiters.sql: simba_waiter",
	}
	if !slices.Equal(got, want) {
		t.Errorf("migrations %q, want %q", got, want)
	}
	if s.latest().SchemaVersion != 3 {
		t.Errorf("latest version %d, want 3", s.latest().SchemaVersion)
	}
	data, err := os.ReadFile("../spec/sql.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ old, new, wantErr string }{
		{"    migration: waiters\n", "    migration: nowhere\n", "is not one of later_migrations"},
		{"{schema_version: 3, migration: waiters}", "{schema_version: 1, migration: waiters}", "must be above 1"},
		{"{schema_version: 3, migration: waiters}", "{schema_version: 3, migration: init}", "duplicate migration init"},
	} {
		if strings.Count(string(data), c.old) != 1 {
			t.Fatalf("%q does not occur once in spec/sql.yaml", c.old)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "sql.yaml"), []byte(strings.Replace(string(data), c.old, c.new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadSQL(dir); err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%q → %q: error %v, want one containing %q", c.old, c.new, err, c.wantErr)
		}
	}
}
