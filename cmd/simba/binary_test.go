package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// simbaBin is the simba binary the tests build once (simbaBinary) and TestMain removes.
var simbaBin struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// simbaBinary builds this command into a temporary directory, once per test binary, and
// returns its path.
func simbaBinary(t *testing.T) string {
	t.Helper()
	simbaBin.once.Do(func() {
		simbaBin.dir, simbaBin.err = os.MkdirTemp("", "simba-cli-test-")
		if simbaBin.err != nil {
			return
		}
		simbaBin.path = filepath.Join(simbaBin.dir, "simba")
		build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", simbaBin.path, ".")
		simbaBin.out, simbaBin.err = build.CombinedOutput()
	})
	if simbaBin.err != nil {
		t.Fatalf("go build: %v\n%s", simbaBin.err, simbaBin.out)
	}
	return simbaBin.path
}

// removeSimbaBinary removes what simbaBinary built.
func removeSimbaBinary() {
	if simbaBin.dir != "" {
		os.RemoveAll(simbaBin.dir)
	}
}
