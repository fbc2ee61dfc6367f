package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/go-sql-driver/mysql"
	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba"
)

// routeDriverLogs sends what go-redis and go-sql-driver/mysql log by themselves into the CLI's
// logger, slog.Default(), at DEBUG. Both drivers otherwise write straight to stderr through
// process-wide loggers (go-redis a line per failed dial while a server is down, dozens in a
// restart; mysql "closing bad idle connection: EOF" after one), around the CLI's own output.
// The library leaves those globals to the program; simba owns its process, so it sets them.
// DEBUG because what they report reaches the CLI as backend errors, which it reports itself.
func routeDriverLogs() { routeDriverLogsTo(slog.Default) }

// routeDriverLogsTo is routeDriverLogs into the logger that logger returns at each line (read
// then, so a later slog.SetDefault is followed).
func routeDriverLogsTo(logger func() *slog.Logger) {
	goredis.SetLogger(redisLog{logger})
	_ = mysql.SetLogger(mysqlLog{logger}) // fails only for a nil logger
}

// redisLog is go-redis's logging interface (redis.SetLogger) over a slog logger.
type redisLog struct{ logger func() *slog.Logger }

// Printf implements go-redis's internal.Logging.
func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil { // go-redis passes one, but a handler may use it
		ctx = context.Background()
	}
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	l.logger().Log(ctx, slog.LevelDebug, msg, "driver", "go-redis")
}

// mysqlLog is go-sql-driver/mysql's Logger (mysql.SetLogger) over a slog logger.
type mysqlLog struct{ logger func() *slog.Logger }

// Print implements mysql.Logger; its arguments are joined as log.Print joins them.
func (l mysqlLog) Print(v ...any) {
	l.logger().Log(context.Background(), slog.LevelDebug, strings.TrimSuffix(fmt.Sprint(v...), "\n"), "driver", "go-sql-driver/mysql")
}

// logLevelEnv names the environment variable that sets the CLI's log level: debug, info (the
// default), warn or error, as slog spells them (a +n or -n offset too, e.g. warn+2).
const logLevelEnv = "SIMBA_LOG_LEVEL"

// setLogLevel sets the level of the CLI's logger, slog.Default(), from level (see
// logLevelEnv); "" leaves it at INFO. At debug the drivers' own lines (routeDriverLogs) show.
func setLogLevel(level string) error {
	if level == "" {
		return nil
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("%w: $%s=%q: want debug, info, warn or error", simba.ErrInvalidOption, logLevelEnv, level)
	}
	slog.SetLogLoggerLevel(l)
	return nil
}
