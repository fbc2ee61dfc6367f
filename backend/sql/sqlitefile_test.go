package sql

import (
	"errors"
	"os"
	osexec "os/exec"
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

// unwritable makes file and its directory unwritable to this process until the returned
// function is called (or the test ends): their modes for a user, the immutable attribute for
// root, whom modes do not stop (chattr, ext4 and most Linux file systems).
func unwritable(t *testing.T, file string) func() {
	t.Helper()
	paths := []string{filepath.Dir(file), file}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(file + suffix); err == nil {
			paths = append(paths, file+suffix)
		}
	}
	var undo func() error
	if os.Geteuid() == 0 {
		if out, err := osexec.Command("chattr", append([]string{"+i"}, paths...)...).CombinedOutput(); err != nil {
			t.Fatalf("chattr +i (root: a file's mode does not stop a write, the immutable attribute does): %v %s", err, out)
		}
		undo = func() error { return osexec.Command("chattr", append([]string{"-i"}, paths...)...).Run() }
	} else {
		for _, p := range paths {
			if err := os.Chmod(p, 0o555); err != nil {
				t.Fatal(err)
			}
		}
		undo = func() error {
			for _, p := range paths {
				if err := os.Chmod(p, 0o755); err != nil {
					return err
				}
			}
			return nil
		}
	}
	done := false
	restore := func() {
		if !done {
			done = true
			if err := undo(); err != nil {
				t.Errorf("making %s writable again: %v", file, err)
			}
		}
	}
	t.Cleanup(restore)
	return restore
}

// TestSQLiteReopensAConnectionOpenedReadOnly: SQLite opens a file it may not write read-only,
// and such a connection stays read-only. A backend whose pool opened its connection while the
// file and its directory were not writable failed every call with "attempt to write a readonly
// database (8)", a permanent error, for good after the file was writable again (trial27: three
// processes with their SQLite file made immutable for 9 s never got a session back). Now such
// a refusal on a file the process may write is retryable and the pool's connections are
// reopened: the backend opens a session again once the file is writable.
func TestSQLiteReopensAConnectionOpenedReadOnly(t *testing.T) {
	dsn := liteDSN(t)
	migrated(t, dsn)
	file := strings.TrimPrefix(dsn, "sqlite://")
	file, _, _ = strings.Cut(file, "?")
	b := open(t, dsn)
	restore := unwritable(t, file)
	if s, err := b.OpenSession(testCtx(t), "o", longTTL); err == nil {
		t.Fatalf("OpenSession on an unwritable file opened session %v", s.ID)
	} else {
		t.Logf("while the file is not writable: %v", err)
	}
	restore()
	var err error
	for i := 0; i < 3; i++ {
		var s spi.Session
		if s, err = b.OpenSession(testCtx(t), "o", longTTL); err == nil {
			_ = b.CloseSession(testCtx(t), s.ID)
			return
		}
		t.Logf("attempt %d after the file is writable again: %v (%v)", i+1, err, spi.Classify(err))
		if spi.Classify(err) == spi.Permanent {
			break
		}
	}
	t.Errorf("OpenSession after the file is writable again: %v (%v); want a session within 3 attempts, the failures retryable", err, spi.Classify(err))
}
