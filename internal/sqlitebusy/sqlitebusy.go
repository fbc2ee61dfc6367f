// Package sqlitebusy recognises SQLite's SQLITE_BUSY and retries an operation that met it, for
// the SQL backend and the CLI: a new connection's PRAGMA journal_mode=wal fails with it at once,
// without waiting in the busy handler, while another process writes to a file not yet in WAL
// mode (another process setting the same new file up).
package sqlitebusy

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// For is how long Retry tries again: the busy timeout the SQL backend's SQLite DSN sets
// (busy_timeout(10000)).
const For = 10 * time.Second

// Is reports whether err is SQLITE_BUSY (any extended code of it).
func Is(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// Retry runs op until it returns nil or an error other than SQLITE_BUSY, For has passed, or ctx
// ends, and returns op's last error (ctx's end returns it without ctx's error: op's is the
// one to report). Between attempts it pauses up to 1, 2, 4 … 64 ms, drawn at random so that
// the processes that met spread out. op must leave nothing behind when it fails (one
// transaction, or idempotent).
func Retry(ctx context.Context, op func() error) error {
	end := time.Now().Add(For)
	for attempt := 1; ; attempt++ {
		err := op()
		if err == nil || !Is(err) || !time.Now().Before(end) {
			return err
		}
		pause := time.NewTimer(time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt-1, 6))))
		select {
		case <-ctx.Done():
			pause.Stop()
			return err
		case <-pause.C:
		}
	}
}
