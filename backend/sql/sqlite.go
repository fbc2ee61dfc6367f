package sql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/simba-go/simba/generated/sqlq"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// NewSQLite returns a SQLite backend on the user's modernc.org/sqlite pool (driver name
// "sqlite"). The backend runs the SQLite session setup (PRAGMA busy_timeout = 10000, PRAGMA
// foreign_keys = ON) once on every connection of db before its first use, and opens every
// multi-statement operation with BEGIN IMMEDIATE, so no DSN parameter is required. The clock is
// the host's: a SQLite file coordinates processes on one host only (never put it on a network
// file system). NewSQLite does no I/O; the schema is checked (or migrated, WithAutoMigrate)
// before the first operation. Close does not close db. The SQLite backends of a process on one
// file run their operations one at a time, in the order they come (SQLite lets one writer
// have the file at a time, and its busy handler is not fair to writers that wait).
func NewSQLite(db *sql.DB, opts ...Option) (*Backend, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: sql sqlite: nil *sql.DB", spi.ErrInvalidOption)
	}
	wd, _ := wire.SQLDialectByName(wire.SQLSQLite)
	return newSQLite(db, wd.SessionSetup, opts)
}

func newSQLite(db *sql.DB, setup []string, opts []Option) (*Backend, error) {
	wd, _ := wire.SQLDialectByName(wire.SQLSQLite)
	d := &stdDialect{
		db:          db,
		q:           func(c dbtx) sqlq.Queries { return sqlq.SQLite(c) },
		begin:       wd.Begin,
		setup:       setup,
		classifyErr: classifySQLite,
		// The migration runs in one BEGIN IMMEDIATE transaction: SQLite's write lock is the
		// migration lock.
		lockMigrate: func(context.Context, *sql.Conn) (func(), error) { return func() {}, nil },
		ddlInTx:     true,
		gate:        newFileGate(db, wd.DatabaseFile),
	}
	b, err := newBackend(wire.SQLSQLite, d, opts)
	if err != nil {
		return nil, err
	}
	d.b = b
	b.waker = newSQLiteWaker(db, wd)
	return b, nil
}

// SQLite lets one writer at a time have the file, and a writer that finds it taken waits in
// SQLite's busy handler, which sleeps 1, 2, 5, 10 … 100 ms between tries and then 100 ms on
// end: under contention a writer can lose try after try to writers that come later, and wait
// past its call's timeout (a release taking over a second under -race on a loaded 2-CPU
// machine, 2026-12-03). So every SQLite backend of a process runs its operations on one file
// one at a time, in the order they come (a channel's senders wait in order): the process's
// writers then never sleep against each other, only against other processes'.

// sqliteGates maps each SQLite file opened by a backend of this process (its path as SQLite
// reports it) to its gate channel (capacity 1).
var sqliteGates sync.Map

// fileGate serialises the operations of the SQLite backends of this process on one file.
type fileGate struct {
	db    *sql.DB
	query string        // wire.SQLDialect.DatabaseFile
	own   chan struct{} // this backend's alone, until the file is known or when it has none

	mu   sync.Mutex
	file chan struct{} // the file's, once known
}

func newFileGate(db *sql.DB, query string) *fileGate {
	return &fileGate{db: db, query: query, own: make(chan struct{}, 1)}
}

// enter waits for the gate (or ctx) and returns its leave.
func (g *fileGate) enter(ctx context.Context) (func(), error) {
	ch := g.channel(ctx)
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// channel returns the file's gate channel, finding the file on first use. A database without a
// file (in memory) or one whose file cannot be read yet has the backend's own.
func (g *fileGate) channel(ctx context.Context) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.file != nil {
		return g.file
	}
	var seq int
	var name, file string
	if err := g.db.QueryRowContext(ctx, g.query).Scan(&seq, &name, &file); err != nil {
		return g.own // try again next time
	}
	if file == "" {
		g.file = g.own
		return g.file
	}
	ch, _ := sqliteGates.LoadOrStore(filepath.Clean(file), g.own)
	g.file = ch.(chan struct{})
	return g.file
}

// SQLite result codes (the primary code is the low byte of an extended code).
const (
	sqliteError    = 1
	sqlitePerm     = 3
	sqliteBusy     = 5
	sqliteLocked   = 6
	sqliteReadOnly = 8
	sqliteCorrupt  = 11
	sqliteCantOpen = 14
	sqliteMisuse   = 21
	sqliteAuth     = 23
	sqliteNotADB   = 26
)

// classifySQLite: SQLITE_BUSY and SQLITE_LOCKED (another writer holds the file past the busy
// timeout) and I/O errors are retryable; "no such table/column" is ErrSchemaMissing; a read-only,
// corrupt, unopenable or foreign file and statement errors are permanent.
func classifySQLite(b *Backend, op string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqliteBusy, sqliteLocked:
			return spi.Unavailable(op, err)
		case sqliteError:
			if msg := se.Error(); strings.Contains(msg, "no such table") || strings.Contains(msg, "no such column") {
				return b.schemaMissing(fmt.Sprintf("%s: %s", op, msg), err)
			}
			return spi.AsPermanent(fmt.Errorf("%s: %w", op, err))
		case sqlitePerm, sqliteReadOnly, sqliteCorrupt, sqliteCantOpen, sqliteMisuse, sqliteAuth, sqliteNotADB:
			return spi.AsPermanent(fmt.Errorf("%s: %w", op, err))
		}
	}
	return spi.Unavailable(op, err)
}
