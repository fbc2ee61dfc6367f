package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCheckSQLiteFileUnwritableDirectory: simba lock, run and migrate on a SQLite file that does
// not exist yet, in a directory this process may not write, say so before SQLite does: its
// "reading the tables of …: unable to open database file (14)" named no cause. (As root, a
// directory's mode does not stop the write: the refusal is simulated.)
func TestCheckSQLiteFileUnwritableDirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "new.db")
	saved := notWritable
	t.Cleanup(func() { notWritable = saved })
	notWritable = func(p string) error {
		if p == dir {
			return syscall.EACCES
		}
		return nil
	}
	err := checkSQLiteFile("sqlite://"+file, false)
	if err == nil || !strings.Contains(err.Error(), "cannot create the database file "+file) ||
		!strings.Contains(err.Error(), "its directory "+dir+" is not writable by this process (permission denied)") {
		t.Fatalf("checkSQLiteFile = %v; want the directory named as not writable", err)
	}
	// status never creates the file: it says the file is missing, as before.
	if err := checkSQLiteFile("sqlite://"+file, true); err == nil || !strings.Contains(err.Error(), "no such database file") {
		t.Fatalf("checkSQLiteFile (must exist) = %v", err)
	}
	// A directory where the file should be (sqlite:///tmp/) is named as such, by every command.
	for _, mustExist := range []bool{false, true} {
		if err := checkSQLiteFile("sqlite://"+dir, mustExist); err == nil || !strings.Contains(err.Error(), "database file "+dir+": it is a directory") {
			t.Fatalf("checkSQLiteFile on a directory (must exist %v) = %v", mustExist, err)
		}
	}
	// A writable directory passes.
	notWritable = func(string) error { return nil }
	if err := checkSQLiteFile("sqlite://"+file, false); err != nil {
		t.Fatalf("checkSQLiteFile in a writable directory = %v", err)
	}
}
