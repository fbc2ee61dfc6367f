package sql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

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
// before the first operation. Close does not close db.
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
	}
	b, err := newBackend(wire.SQLSQLite, d, opts)
	if err != nil {
		return nil, err
	}
	d.b = b
	b.waker = newSQLiteWaker(db, wd)
	return b, nil
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
