package sql

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"

	mysqldriver "github.com/go-sql-driver/mysql"
)

// mysqlDriverLog is go-sql-driver/mysql's Logger over the backend's slog logger (WithLogger;
// slog.Default() when unset, read at each line so a later slog.SetDefault is followed), at
// DEBUG: what the driver logs (a bad idle connection closed, a packet cut short) reaches the
// client as a backend error too, which the client reports itself.
type mysqlDriverLog struct{ logger *slog.Logger }

// Print implements mysql.Logger; its arguments are joined as log.Print joins them.
func (l mysqlDriverLog) Print(v ...any) {
	lg := l.logger
	if lg == nil {
		lg = slog.Default()
	}
	lg.Log(context.Background(), slog.LevelDebug, strings.TrimSuffix(fmt.Sprint(v...), "\n"), "driver", "go-sql-driver/mysql")
}

// routeMySQLDriverLog points the configuration's Logger (go-sql-driver's per-configuration
// logger, which its connections use) at logger, unless the program has chosen one: the driver
// fills Logger from its process-wide logger (mysql.SetLogger) when the configuration is made,
// and only its own default — a log.Logger on os.Stderr with the prefix "[mysql] " — is
// replaced. The process-wide logger itself is never changed, so two backends log each to its
// own logger, and a logger the program set with mysql.SetLogger before Open is kept.
func routeMySQLDriverLog(cfg *mysqldriver.Config, logger *slog.Logger) {
	if isMySQLDefaultLogger(cfg.Logger) {
		cfg.Logger = mysqlDriverLog{logger}
	}
}

// isMySQLDefaultLogger reports whether l is go-sql-driver's own default logger (or unset, which
// the driver reads as its default).
func isMySQLDefaultLogger(l mysqldriver.Logger) bool {
	if l == nil {
		return true
	}
	std, ok := l.(*log.Logger)
	return ok && std.Writer() == os.Stderr && std.Prefix() == "[mysql] "
}

// mysqlConnectorLog is the Logger MySQLConnector gives a configuration that still has the
// driver's default: the lines go, at DEBUG, to the logger of the backend NewMySQL makes on the
// connector's pool (its WithLogger), and to slog.Default() until then or without one — where
// Open's pool sends them — rather than to the driver's stderr logger behind the program's back
// (trial 31: ~230 "[mysql] packets.go:58 unexpected EOF" lines on stderr in one fault run of a
// pool the program had made itself).
type mysqlConnectorLog struct{ to atomic.Pointer[slog.Logger] }

// Print implements mysql.Logger.
func (l *mysqlConnectorLog) Print(v ...any) { mysqlDriverLog{l.to.Load()}.Print(v...) }
