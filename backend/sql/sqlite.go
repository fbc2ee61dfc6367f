package sql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/simba-go/simba/generated/sqlq"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/sqlitebusy"
	"github.com/simba-go/simba/spi"
)

// NewSQLite returns a SQLite backend on the user's modernc.org/sqlite pool (driver name
// "sqlite"). The backend runs the SQLite session setup (PRAGMA busy_timeout = 10000, PRAGMA
// foreign_keys = ON) once on every connection of db before its first use, and opens every
// multi-statement operation with BEGIN IMMEDIATE, so no DSN parameter is required. The clock is
// the host's: a SQLite file coordinates processes on one host only (never put it on a network
// file system). NewSQLite does no I/O; the schema is checked (or migrated, WithAutoMigrate)
// before the first operation. Close does not close db. The SQLite backends of a process on one
// file run their operations one at a time, in the order they come, keep-alives first (SQLite
// lets one writer have the file at a time, and its busy handler is not fair to writers that
// wait); those of different processes take turns through advisory locks on a sidecar file next
// to the database, "<file>-simba-gate" (created at the first operation that may write, with the
// database file's permissions; on
// Linux, macOS and the BSDs; elsewhere, or if it cannot be opened for writing, they meet in the
// busy handler).
func NewSQLite(db *sql.DB, opts ...Option) (*Backend, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: sql sqlite: nil *sql.DB", spi.ErrInvalidOption)
	}
	wd, _ := wire.SQLDialectByName(wire.SQLSQLite)
	return newSQLite(db, wd.SessionSetup, "", false, nil, opts)
}

// newSQLite makes the backend on db; file is the database file Open opened ("" for the user's
// pool), which its errors name when SQLite cannot open it; readOnly, that Open's DSN opens it
// read-only (mode=ro); wal, if not nil, puts the database in WAL mode before the first
// operation that may write.
func newSQLite(db *sql.DB, setup []string, file string, readOnly bool, wal *walSwitch, opts []Option) (*Backend, error) {
	wd, _ := wire.SQLDialectByName(wire.SQLSQLite)
	d := &stdDialect{
		db:    db,
		q:     func(c dbtx) sqlq.Queries { return sqlq.SQLite(c) },
		begin: wd.Begin,
		setup: setup,
		classifyErr: func(b *Backend, op string, err error) error {
			err = sqliteFileError(file, err)
			if file != "" && !readOnly && staleReadOnly(err) {
				// SQLite opens a file it may not write read-only, and the connection stays
				// so: a connection the pool opened while the file (or its directory) was not
				// writable refused every write after it was again, for as long as the pool
				// kept it. The pool is Open's own: drop its idle connections (the one that
				// failed is back among them), and let the call be retried.
				db.SetMaxIdleConns(0)
				db.SetMaxIdleConns(2) // database/sql's default, which Open's pool keeps
				return spi.Unavailable(op, fmt.Errorf("%w (a connection opened while the file was not writable; the pool's connections are reopened)", err))
			}
			return classifySQLite(b, op, err)
		},
		// The migration runs in one BEGIN IMMEDIATE transaction: SQLite's write lock is the
		// migration lock.
		lockMigrate: func(context.Context, *sql.Conn) (func(), error) { return func() {}, nil },
		ddlInTx:     true,
		migrateBusy: true,
		gate:        newFileGate(db, wd.DatabaseFile),
		wal:         wal,
	}
	b, err := newBackend(wire.SQLSQLite, d, opts)
	if err != nil {
		return nil, err
	}
	d.b = b
	sw := newSQLiteWaker(db, wd)
	b.waker, b.notes, b.groupsN = sw, sw, sw
	return b, nil
}

// SQLite lets one writer at a time have the file, and a writer that finds it taken waits in
// SQLite's busy handler, which sleeps 1, 2, 5, 10 … 100 ms between tries and then 100 ms on
// end: under contention a writer can lose try after try to writers that come later, and wait
// past its call's timeout (a release taking over a second under -race on a loaded 2-CPU
// machine, 2026-12-03). So every SQLite backend of a process runs its operations on one file
// one at a time, in the order they come (keep-alives first): the process's writers then never
// sleep against each other; and the processes take turns at the cross-process gate (xgate.go),
// so they do not sleep against each other's either.

// sqliteGates maps each SQLite file opened by a backend of this process (its path as SQLite
// reports it) to its *fileLock.
var sqliteGates sync.Map

// fileLock is how the operations of this process on one SQLite file take turns: among
// themselves (turns), then with the other processes' (cross, xgate.go; nil where there is none).
type fileLock struct {
	turns *turns

	crossOnce sync.Once
	cross     *crossGate
}

// crossGate returns the file's cross-process gate, opening its sidecar on first use; nil if
// there is none.
func (l *fileLock) crossGate(file string) *crossGate {
	l.crossOnce.Do(func() {
		if lk := openGate(file); lk != nil {
			l.cross = &crossGate{lk: lk}
		}
	})
	return l.cross
}

// fileGate serialises the operations of the SQLite backends of this process on one file, and
// has them take turns with the other processes' at the cross-process gate (xgate.go).
type fileGate struct {
	db    *sql.DB
	query string    // wire.SQLDialect.DatabaseFile
	own   *fileLock // this backend's alone, until the file is known or when it has none

	mu   sync.Mutex
	file *fileLock // the file's, once known
	path string    // the file's path, once known ("": none, in memory)
}

func newFileGate(db *sql.DB, query string) *fileGate {
	return &fileGate{db: db, query: query, own: &fileLock{turns: &turns{}}}
}

// enter waits for the gate's turn (or ctx) and returns its leave. A keep-alive (urgentCtx)
// goes ahead of the other operations waiting: behind a stream of them (a client bounds its
// calls in flight at 32, and every backend of the process on the file queues here) it would
// wait past its timeout, and the session expire. Once this process's turn has come, the
// operation waits for the cross-process gate, if the file has one.
//
// An operation that only reads (readOnlyCtx: Inspect) does not take the cross-process gate,
// which orders writers, and does not open its sidecar: simba status must leave no file behind
// (the first operation that may write opens it, creating it if need be).
func (g *fileGate) enter(ctx context.Context) (func(), error) {
	l, path := g.fileLock(ctx)
	u := urgent(ctx)
	leave, err := l.turns.take(ctx, u)
	if err != nil || path == "" || readOnly(ctx) {
		return leave, err
	}
	cross := l.crossGate(path)
	if cross == nil {
		return leave, nil
	}
	leaveCross, err := cross.enter(ctx, u)
	if err != nil {
		leave()
		return nil, err
	}
	return func() {
		leaveCross()
		leave()
	}, nil
}

// turns is a lock taken in turns: first come, first served, the urgent before the others.
type turns struct {
	mu     sync.Mutex
	held   bool
	urgent []chan struct{}
	other  []chan struct{}
}

// take waits for the turn (or ctx) and returns its leave.
func (t *turns) take(ctx context.Context, urgent bool) (func(), error) {
	t.mu.Lock()
	if !t.held {
		t.held = true
		t.mu.Unlock()
		return t.leave, nil
	}
	turn := make(chan struct{}, 1)
	q := &t.other
	if urgent {
		q = &t.urgent
	}
	*q = append(*q, turn)
	t.mu.Unlock()
	select {
	case <-turn:
		return t.leave, nil
	case <-ctx.Done():
		t.mu.Lock()
		if i := slices.Index(*q, turn); i >= 0 {
			*q = slices.Delete(*q, i, i+1)
			t.mu.Unlock()
			return nil, ctx.Err()
		}
		t.mu.Unlock()
		t.leave() // the turn came as ctx ended: pass it on
		return nil, ctx.Err()
	}
}

// leave passes the turn to the next waiting, urgent first, or frees it.
func (t *turns) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, q := range []*[]chan struct{}{&t.urgent, &t.other} {
		if len(*q) > 0 {
			next := (*q)[0]
			*q = slices.Delete(*q, 0, 1)
			next <- struct{}{}
			return
		}
	}
	t.held = false
}

// urgentKey marks the context of an operation that goes ahead at the file gate.
type urgentKey struct{}

// urgentCtx marks ctx's operation as urgent at the file gate (a keep-alive).
func urgentCtx(ctx context.Context) context.Context {
	return context.WithValue(ctx, urgentKey{}, true)
}

func urgent(ctx context.Context) bool { return ctx.Value(urgentKey{}) != nil }

// fileLock returns the file's lock and path, finding the file on first use. A database without
// a file (in memory) or one whose file cannot be read yet has the backend's own, and path "":
// no cross-process gate.
func (g *fileGate) fileLock(ctx context.Context) (*fileLock, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.file != nil {
		return g.file, g.path
	}
	var seq int
	var name, file string
	if err := g.db.QueryRowContext(ctx, g.query).Scan(&seq, &name, &file); err != nil {
		return g.own, "" // try again next time
	}
	if file == "" {
		g.file = g.own
		return g.file, ""
	}
	file = filepath.Clean(file)
	l, _ := sqliteGates.LoadOrStore(file, g.own)
	g.file, g.path = l.(*fileLock), file
	return g.file, g.path
}

// writeLockHeld adds to err, a statement's deadline on the file or its SQLITE_BUSY (the busy
// handler waited busy_timeout: sqliteWriteBusy), the process that holds SQLite's write lock
// there, if another does: every process on the file then waits for it, keep-alives included,
// and sessions expire, and a bare "context deadline exceeded" or "database is locked (5)
// (SQLITE_BUSY)" told the operator nothing of why, nor which file (a write transaction from
// outside Simba, such as the sqlite3 shell's BEGIN IMMEDIATE, or a process stopped inside a
// write). SQLITE_BUSY with no holder found (not Linux, or a connection of this process) still
// names the file and the write lock. The error stays retryable: the lock is held as long as the
// other transaction, which only its end lifts, and the call succeeds once it has.
func (g *fileGate) writeLockHeld(err error) error {
	g.mu.Lock()
	path := g.path
	g.mu.Unlock()
	if path == "" {
		return err
	}
	busy := sqliteWriteBusy(err)
	waited := ""
	if busy {
		waited = "; the call waited busy_timeout for it (the DSN's _pragma=busy_timeout, 10 s by default), and succeeds once that transaction ends"
	}
	if pid := sqliteWriter(path); pid != 0 {
		return fmt.Errorf("%w (process %d holds SQLite's write lock on %s: no other process can write to the file until it ends its transaction%s)", err, pid, path, waited)
	}
	if busy {
		return fmt.Errorf("%w (another connection, usually another process's, holds SQLite's write lock on %s: no other can write to the file until it ends its transaction%s)", err, path, waited)
	}
	return err
}

// sqliteWriteBusy reports whether err is SQLITE_BUSY itself (5): a write lock another
// connection held past busy_timeout. Its extended codes are other conflicts (BUSY_SNAPSHOT: a
// read transaction that cannot become a write one; BUSY_RECOVERY).
func sqliteWriteBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqliteBusy
}

// readOnlyKey marks the context of an operation that only reads (readOnlyCtx).
type readOnlyKey struct{}

// readOnlyCtx marks ctx's operations as reads only: at the file gate they skip the
// cross-process gate (fileGate.enter).
func readOnlyCtx(ctx context.Context) context.Context {
	return context.WithValue(ctx, readOnlyKey{}, true)
}

func readOnly(ctx context.Context) bool { return ctx.Value(readOnlyKey{}) != nil }

// walSwitch puts a SQLite database in WAL mode (readers do not block the writer) before the
// backend's first operation that may write; Open's backend has one unless its DSN sets a
// journal_mode. Setting it there, rather than by a pragma in the DSN that every connection runs
// as it opens, leaves the file as it is for what only reads (Inspect: simba status). A file that
// already holds tables in another mode (made by the sqlite3 shell or another program, or set
// back to it) is switched too, with a warning naming the mode and how to keep it: WAL mode stays
// with the file, and every program that opens it then needs the shared-memory file beside it
// (all on one host, a SQLite of 3.7 or later). A new, empty file is switched silently.
type walSwitch struct {
	file string // the database file, for the warning

	done atomic.Bool // the database was found or put in WAL mode (or cannot be: see ensure)
	mu   sync.Mutex  // held while one operation does it
}

// ensure puts the database of d in WAL mode unless it has done so already. SQLite refuses the
// switch with SQLITE_BUSY, at once, while another connection uses the file: it tries again for
// up to sqlitebusy.For. A database that cannot be in WAL mode (SQLite then answers with the
// mode it kept, e.g. on a file system without shared memory) is left in its mode.
func (w *walSwitch) ensure(ctx context.Context, d *stdDialect) error {
	if w.done.Load() {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done.Load() {
		return nil
	}
	c, err := d.conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	wd, _ := wire.SQLDialectByName(wire.SQLSQLite)
	var mode string
	if err := c.QueryRowContext(ctx, wd.JournalMode).Scan(&mode); err != nil {
		return err
	}
	if strings.EqualFold(mode, "wal") {
		w.done.Store(true)
		return nil
	}
	var objects int
	if err := c.QueryRowContext(ctx, wd.ObjectCount).Scan(&objects); err != nil {
		return err
	}
	var now string
	if err := sqlitebusy.Retry(ctx, func() error {
		return c.QueryRowContext(ctx, wd.JournalWAL).Scan(&now)
	}); err != nil {
		return err
	}
	w.done.Store(true)
	if objects > 0 && strings.EqualFold(now, "wal") {
		log := d.b.cfg.logger
		if log == nil {
			log = slog.Default()
		}
		log.Warn(fmt.Sprintf("simba: sql sqlite: switched %s from journal_mode %s to WAL (readers do not block the writer); to keep %s, put _pragma=journal_mode(%s) in the DSN",
			w.file, mode, mode, mode), "file", w.file, "journal_mode_was", mode)
	}
	return nil
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

// sqliteFileError adds to err, when it is SQLITE_CANTOPEN or SQLITE_READONLY, the file SQLite
// could not open or write and, when it can tell, why: SQLite's messages, "unable to open
// database file (14)" and "attempt to write a readonly database (8)", name neither. It returns
// err unchanged for other errors and when file is "".
func sqliteFileError(file string, err error) error {
	var se *sqlite.Error
	if file == "" || !errors.As(err, &se) {
		return err
	}
	why := ""
	dir := filepath.Dir(file)
	var denied error // a permission this process lacks: the error matches spi.ErrAccessDenied
	denies := func(path string) error {
		werr := notWritable(path)
		if errors.Is(werr, fs.ErrPermission) {
			denied = werr
		}
		return werr
	}
	switch se.Code() & 0xff {
	case sqliteCantOpen:
		if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
			why = ": its directory " + dir + " does not exist"
		} else if _, serr := os.Stat(file); errors.Is(serr, fs.ErrNotExist) {
			why = ": no such file"
			if werr := denies(dir); werr != nil {
				// SQLite creates a missing file (unless mode=rw): it could not here.
				why += ", and its directory " + dir + " is not writable by this process (" + werr.Error() + ")"
			}
		} else if st, serr := os.Stat(file); serr != nil {
			why = ": " + serr.Error()
			if errors.Is(serr, fs.ErrPermission) {
				denied = serr
			}
		} else if st.IsDir() {
			why = ": it is a directory"
		} else if f, oerr := os.Open(file); errors.Is(oerr, fs.ErrPermission) {
			why = ": " + oerr.Error()
			denied = oerr
		} else if oerr == nil {
			f.Close()
		}
	case sqliteReadOnly:
		if werr := denies(file); werr != nil {
			why = ": not writable by this process (" + werr.Error() + ")"
		} else if werr := denies(dir); werr != nil {
			// The journal (-wal, -shm) goes beside the file.
			why = ": its directory " + dir + " is not writable by this process (" + werr.Error() + "), and SQLite writes its journal there"
		}
	default:
		return err
	}
	if denied != nil {
		return spi.AccessDenied(fmt.Sprintf("database file %s%s", file, why),
			"privilege refused: this process (its user) may not open or write the file, or write its directory: give it the permission there, or run it as the file's owner", err)
	}
	return fmt.Errorf("%w: database file %s%s", err, file, why)
}

// staleReadOnly reports whether err is SQLITE_READONLY on a file this process may write
// (sqliteFileError found no permission missing): with a DSN that does not ask for mode=ro, a
// connection SQLite opened read-only while the file was not writable.
func staleReadOnly(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqliteReadOnly && !errors.Is(err, spi.ErrAccessDenied)
}

// classifySQLite: SQLITE_BUSY and SQLITE_LOCKED (another writer holds the file past the busy
// timeout) and I/O errors are retryable; "no such table/column" is ErrSchemaMissing; a read-only,
// corrupt, unopenable or foreign file and statement errors are permanent. SQLITE_PERM and
// SQLITE_AUTH, and a file that is read-only or cannot be opened because this process lacks
// the permission (sqliteFileError), match spi.ErrAccessDenied.
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
		case sqlitePerm, sqliteAuth:
			return spi.AccessDenied(op, "privilege refused: SQLite denied the access (SQLITE_PERM, SQLITE_AUTH)", err)
		case sqliteReadOnly, sqliteCorrupt, sqliteCantOpen, sqliteMisuse, sqliteNotADB:
			return spi.AsPermanent(fmt.Errorf("%s: %w", op, err))
		}
	}
	return spi.Unavailable(op, err)
}
