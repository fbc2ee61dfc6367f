package main

import (
	"testing"

	"github.com/simba-go/simba/examples/internal/exampletest"
	"github.com/simba-go/simba/internal/testenv"
)

func TestFailover(t *testing.T) {
	exampletest.Failover(t, run, testenv.Postgres(t))
}
