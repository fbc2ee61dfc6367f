package sql

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simba-go/simba/spi"
)

// TestSQLiteCannotOpenNamesTheFile: when SQLite cannot open the file of a sqlite:// DSN, the
// error names the file and why (SQLite's own message, "unable to open database file (14)",
// names neither): a missing directory, or a missing file with mode=rw (which opens an existing
// file only, and leaves a missing one uncreated). The error is permanent.
func TestSQLiteCannotOpenNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		file string
		dsn  string
		want string
	}{
		{filepath.Join(dir, "nodir", "simba.db"), "", "its directory " + filepath.Join(dir, "nodir") + " does not exist"},
		{filepath.Join(dir, "missing.db"), "?mode=rw", "no such file"},
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
