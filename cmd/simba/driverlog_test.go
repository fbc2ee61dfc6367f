package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba"
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

	addr := testenv.RefusedAddr(t)
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

// TestLogLevelFromEnv: $SIMBA_LOG_LEVEL=debug lets the drivers' own lines through the CLI's
// logger to stderr (a failed dial of go-redis, against a port nobody listens on), the default
// keeps them off it, and a level slog does not know is a usage error (exit 2).
func TestLogLevelFromEnv(t *testing.T) {
	dsn := "redis://" + testenv.RefusedAddr(t) + "/0"
	for _, c := range []struct {
		level     string
		driverLog bool
		status    int
	}{
		{"", false, 1},
		{"debug", true, 1},
		{"WARN", false, 1},
		{"loud", false, 2},
	} {
		t.Run("level="+c.level, func(t *testing.T) {
			t.Setenv(logLevelEnv, c.level)
			_, stderr, status := runSimba(t, "status", "-dsn", dsn)
			if status != c.status {
				t.Fatalf("exit status %d, want %d; stderr: %s", status, c.status, stderr)
			}
			if got := strings.Contains(stderr, "driver=go-redis"); got != c.driverLog {
				t.Errorf("go-redis's own lines on stderr: %v, want %v; stderr: %s", got, c.driverLog, stderr)
			}
			if c.status == 2 && (!strings.Contains(stderr, logLevelEnv) || strings.Contains(stderr, "simba: simba:")) {
				t.Errorf("the usage error does not name $%s once, with one prefix: %s", logLevelEnv, stderr)
			}
		})
	}
}

// TestSetLogLevel: the levels slog knows, in any case and with an offset, set the CLI's
// logger's; others are refused as invalid options.
func TestSetLogLevel(t *testing.T) {
	t.Cleanup(func() { slog.SetLogLoggerLevel(slog.LevelInfo) })
	for level, want := range map[string]slog.Level{"debug": slog.LevelDebug, "ERROR": slog.LevelError, "warn+2": slog.LevelWarn + 2} {
		if err := setLogLevel(level); err != nil {
			t.Fatalf("setLogLevel(%q): %v", level, err)
		}
		if !slog.Default().Enabled(context.Background(), want) || slog.Default().Enabled(context.Background(), want-1) {
			t.Errorf("setLogLevel(%q): the default logger is not at %v", level, want)
		}
	}
	if err := setLogLevel("verbose"); !errors.Is(err, simba.ErrInvalidOption) {
		t.Errorf("setLogLevel(\"verbose\") = %v, want ErrInvalidOption", err)
	}
}
