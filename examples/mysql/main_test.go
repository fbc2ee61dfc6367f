package main

import (
	"testing"

	"github.com/simba-go/simba/examples/internal/exampletest"
)

func TestFailover(t *testing.T) {
	exampletest.Failover(t, run, exampletest.MySQL(t))
}
