package sql

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/simba-go/simba/spi"
)

// TestSQLiteCannotOpenNamesTheFile: when SQLite cannot open the file of a sqlite:// DSN, the
// error names the file and why (SQLite's own message, "unable to open database file (14)",
// names neither): a missing directory, a missing file with mode=rw (which opens an existing
// file only, and leaves a missing one uncreated), or a directory where the file should be. The
// error is permanent.
func TestSQLiteCannotOpenNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		file string
		dsn  string
		want string
	}{
		{filepath.Join(dir, "nodir", "simba.db"), "", "its directory " + filepath.Join(dir, "nodir") + " does not exist"},
		{filepath.Join(dir, "missing.db"), "?mode=rw", "no such file"},
		{dir, "", "it is a directory"}, // sqlite:///tmp/ said only "database file /tmp"
	} {
		b, err := Open(testCtx(t), "sqlite://"+tc.file+tc.dsn)
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.SchemaVersion(testCtx(t))
		b.Close()
		if err == nil || !strings.Contains(err.Error(), "database file "+tc.file+": "+tc.want) ||
			!strings.Contains(err.Error(), "unable to open database file") || spi.Classify(err) != spi.Permanent {
			t.Errorf("SchemaVersion on %s%s = %v (class %v); want a permanent error naming the file and %q",
				tc.file, tc.dsn, err, spi.Classify(err), tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !os.IsNotExist(err) {
		t.Errorf("mode=rw created the missing file: %v", err)
	}
}

// TestSQLiteReadOnlyNamesTheFile: a write SQLite refuses as read-only ("attempt to write a
// readonly database (8)", which names no file) names the database file and, when this process
// may not write it or its directory (where the journal goes), says so. The error is permanent.
// The file is opened with mode=ro; as root a file's mode does not stop a write, so the refused
// access is simulated for the second and third checks, whose errors match spi.ErrAccessDenied
// (the first's, a file opened read-only that the process may write, does not).
func TestSQLiteReadOnlyNamesTheFile(t *testing.T) {
	dsn := liteDSN(t)
	migrated(t, dsn)
	file := strings.TrimPrefix(dsn, "sqlite://")
	file, _, _ = strings.Cut(file, "?")
	saved := notWritable
	t.Cleanup(func() { notWritable = saved })
	for _, tc := range []struct {
		denied string // the path notWritable refuses
		want   string
	}{
		{"", "database file " + file},
		{file, "database file " + file + ": not writable by this process (permission denied)"},
		{filepath.Dir(file), "database file " + file + ": its directory " + filepath.Dir(file) + " is not writable by this process (permission denied)"},
	} {
		notWritable = func(p string) error {
			if p == tc.denied {
				return syscall.EACCES
			}
			return nil
		}
		b, err := Open(testCtx(t), "sqlite://"+file+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.OpenSession(testCtx(t), "o", longTTL)
		b.Close()
		if err == nil || !strings.Contains(err.Error(), "attempt to write a readonly database") ||
			!strings.Contains(err.Error(), tc.want) || spi.Classify(err) != spi.Permanent {
			t.Errorf("OpenSession on a read-only file (denied %q) = %v (class %v); want a permanent error with %q",
				tc.denied, err, spi.Classify(err), tc.want)
		}
		// A permission this process lacks is access denied; a file opened read-only
		// (mode=ro) that it may write is not.
		if denied := errors.Is(err, spi.ErrAccessDenied); denied != (tc.denied != "") ||
			(denied && !strings.Contains(err.Error(), "privilege refused")) {
			t.Errorf("OpenSession on a read-only file (denied %q) = %v: errors.Is(spi.ErrAccessDenied) = %v, want %v (saying privilege refused)",
				tc.denied, err, denied, tc.denied != "")
		}
	}
}
