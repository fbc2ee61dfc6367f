package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/simba-go/simba/examples/internal/exampletest"
	"github.com/simba-go/simba/internal/testenv"
)

func TestFailover(t *testing.T) {
	exampletest.Failover(t, run, "redis+cluster://"+strings.Join(testenv.RedisCluster(t), ","))
}

// A plain redis:// DSN pointed at a Cluster node is a misconfiguration the program reports at
// once, instead of waiting to lead for its whole -for.
func TestPlainDSNRefused(t *testing.T) {
	node := testenv.RedisCluster(t)[0]
	err := run(context.Background(), []string{"-dsn", "redis://" + node, "-name", exampletest.Name(t, "example-leader"), "-for", "5m"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "redis+cluster://") {
		t.Fatalf("run on redis://%s = %v, want an error naming redis+cluster://", node, err)
	}
}
