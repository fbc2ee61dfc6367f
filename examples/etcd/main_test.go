package main

import (
	"strings"
	"testing"

	"github.com/simba-go/simba/examples/internal/exampletest"
	"github.com/simba-go/simba/internal/testenv"
)

func TestFailover(t *testing.T) {
	exampletest.Failover(t, run, "etcd://"+strings.Join(testenv.Etcd(t), ",")+"/simba-example")
}
