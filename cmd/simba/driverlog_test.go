package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/internal/testenv"
)

// TestDriverLogsGoThroughTheCLILogger: with the CLI's routing on, go-redis's line for a failed
// dial (against a port nobody listens on) and a go-sql-driver/mysql line reach the CLI's slog
// logger at DEBUG, tagged with the driver, instead of stderr.
func TestDriverLogsGoThroughTheCLILogger(t *testing.T) {
	var logs testenv.LogBuffer
	logger := logs.Logger()
	routeDriverLogsTo(func() *slog.Logger { return logger })
	t.Cleanup(routeDriverLogs) // what main sets

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // now nobody listens there: every dial is refused
	c := goredis.NewClient(&goredis.Options{Addr: addr, DialerRetries: 1, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err == nil {
		t.Fatalf("PING %s succeeded: something listens there", addr)
	}
	out := logs.String()
	if !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "failed to dial") || !strings.Contains(out, "driver=go-redis") {
		t.Fatalf("go-redis's dial failure did not reach the CLI's logger at DEBUG: %q", out)
	}

	mysqlLog{func() *slog.Logger { return logger }}.Print("closing bad idle connection: ", errors.New("EOF"))
	if out := logs.String(); !strings.Contains(out, `msg="closing bad idle connection: EOF" driver=go-sql-driver/mysql`) {
		t.Fatalf("the mysql line did not reach the CLI's logger: %q", out)
	}
}
