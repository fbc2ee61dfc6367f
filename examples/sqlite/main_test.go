package main

import (
	"path/filepath"
	"testing"

	"github.com/simba-go/simba/examples/internal/exampletest"
)

func TestFailover(t *testing.T) {
	exampletest.Failover(t, run, "sqlite://"+filepath.Join(t.TempDir(), "simba.db"))
}
