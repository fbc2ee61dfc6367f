package sql

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/generated/sqlq"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/internal/adoptlog"
	"github.com/simba-go/simba/internal/foreign"
	"github.com/simba-go/simba/internal/minttl"
	"github.com/simba-go/simba/spi"
	"github.com/simba-go/simba/sql/schema"
)

// MaxOwnerLen bounds the owner string of a session, in bytes (wire.MaxOwnerLen, the same on
// every backend).
const MaxOwnerLen = wire.MaxOwnerLen

// DefaultHousekeepingInterval is how often a Backend deletes expired sessions and memberships
// unless WithHousekeepingInterval says otherwise.
const DefaultHousekeepingInterval = time.Minute

// Option configures a Backend.
type Option func(*config) error

type config struct {
	housekeeping time.Duration
	autoMigrate  bool
	logger       *slog.Logger
}

// WithLogger sets where the backend logs warnings: foreign records it skips, such as a group
// member whose session id is not of the form clients make (logged once per record). The default
// is the logger of the client the backend is given to, if it has one (simba.WithLogger: see
// AdoptLogger), and slog.Default() otherwise.
//
// go-sql-driver/mysql logs on its own ("closing bad idle connection: EOF" after a server
// restart, packet errors) through the logger its configuration holds, which is filled from the
// process-wide one (mysql.SetLogger; by default stderr) when the configuration is made. Open
// points its pool's configuration at this logger instead, at DEBUG (the failures that matter
// reach the client as backend errors), unless the program set a logger of its own with
// mysql.SetLogger before Open: that one is kept. Open never changes the process-wide logger,
// so each backend's driver lines go to its own logger. A pool of your own made through
// MySQLConnector does the same: a configuration that still has the driver's default logger
// sends its lines, at DEBUG, to the logger of the backend NewMySQL makes on that pool (this
// option; slog.Default() without it); set the configuration's Logger field (a type with
// Print(v ...any)) before MySQLConnector to keep them yourself. A pool made with another
// connector logs where its configuration says. pgx and the SQLite driver log nothing by
// themselves.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		c.logger = l
		return nil
	}
}

// WithHousekeepingInterval sets how often the backend runs Housekeeping in the background
// (deleting the memberships of expired sessions and the expired sessions that hold no lease).
// The default is DefaultHousekeepingInterval; d ≤ 0 turns the background run off (call
// Housekeeping yourself, or rely on another client's backend: one is enough per database).
// Each run waits a random extra of up to a tenth of d, so that many clients do not run it in
// step.
func WithHousekeepingInterval(d time.Duration) Option {
	return func(c *config) error {
		c.housekeeping = d
		return nil
	}
}

// WithAutoMigrate makes the backend apply the embedded migrations (Migrate) before its first
// operation instead of only checking the schema version. Open with this option migrates at once.
// Applying a migration needs the privileges to create tables.
func WithAutoMigrate() Option {
	return func(c *config) error {
		c.autoMigrate = true
		return nil
	}
}

// Backend is the SQL implementation of the Simba SPI (spi.Backend, and spi.Inspector; on
// PostgreSQL also spi.Hinter) for one of the three dialects. It is safe for concurrent use.
type Backend struct {
	// logSink is where cfg.logger writes when no WithLogger was given (nil otherwise): see
	// AdoptLogger.
	logSink *adoptlog.Sink
	d       dialect
	plans   map[string]*plan // the spec's operations on this dialect (ops.go)
	// wrap, when set (tests only), wraps the queries every operation runs on.
	wrap    func(sqlq.Queries) sqlq.Queries
	name    string // wire.SQLPostgres, wire.SQLMySQL or wire.SQLSQLite
	cfg     config
	closers []func() // what Close closes: only what Open created
	closed  atomic.Bool
	lifeMu  sync.Mutex // orders Close with goroutine starts (Hints)

	schemaMu sync.Mutex
	schemaOK bool

	foreign *foreign.Filter // skips and reports foreign group members
	waker   waker           // SQLite and MySQL/MariaDB: wake-up hints for waiters (wake.go)
	notes   sessionNotes    // the waker, or PostgreSQL's hint listener (pgHub); nil: none
	groupsN groupNotes      // PostgreSQL's hint listener (pgHub), or SQLite's waker; nil: none

	// kaFailed: the last keep-alive failed, so the way back from the server may be broken
	// while the way there works (a one-way partition): the next keep-alive proves a round trip
	// first (KeepAlive).
	kaFailed atomic.Bool
	// withdrawn: the withdrawals that failed, which the session's next keep-alive runs again
	// (entries live with their session: sessionqueue.go).
	withdrawn withdrawals
	// queued: the sessions that may have live waiter entries, whose keep-alive moves them on
	// MySQL/MariaDB and SQLite (sessionqueue.go).
	queued queuedSessions
	// minTTL is the shortest session TTL OpenSession was asked for (0: none yet); it paces
	// PostgreSQL's hint listener's probes (see pgDialect.probeEvery).
	minTTL minttl.Shortest

	stop chan struct{} // closed by Close: stops the background goroutines
	wg   sync.WaitGroup
}

var (
	_ spi.Backend        = (*Backend)(nil)
	_ spi.Inspector      = (*Backend)(nil)
	_ spi.LeaseInspector = (*Backend)(nil)
	_ spi.Hinter         = (*Backend)(nil)
	_ spi.Queuer         = (*Backend)(nil)
	_ spi.TTLChecker     = (*Backend)(nil)
)

// dialect is how one SQL dialect runs statements: the operations themselves are the spec's
// (ops.go). Names are validated and the schema checked before an operation runs; errors are
// returned raw and classified by the dialect's classify.
type dialect interface {
	// with runs fn on the dialect's queries: inside one transaction (the dialect's begin, then
	// COMMIT, or ROLLBACK when fn fails) when tx, otherwise statement by statement. A run the
	// database rolled back to break a deadlock is run again.
	with(ctx context.Context, tx bool, fn func(q sqlq.Queries) error) error
	// catalog runs a catalog query of the schema check (wire.SQLSchemaCheck) and returns its
	// rows, each of ncols values as text (NULL as "").
	catalog(ctx context.Context, query string, ncols int) ([][]string, error)
	// migrate runs the statements of every migration whose version is above current,
	// holding whatever lock keeps two migrating clients apart.
	migrate(ctx context.Context, ms []schema.Migration) error
	// classify turns a raw error into a Simba error: transient → spi.Unavailable, missing
	// table → ErrSchemaMissing, permanent → spi.AsPermanent.
	classify(op string, err error) error
}

// groupNotes is told which groups the backend's sessions take part in: PostgreSQL's hint
// listener LISTENs on the own channels of those groups alone (pgHub). (What ends a session,
// its close or expiry, reaches it through sessionNotes.)
type groupNotes interface {
	// joining notes a Join of group by sid about to be sent.
	joining(sid, group string)
	// joined notes the Join's outcome (err: unknown).
	joined(sid, group string, st spi.Status, err error)
	// left notes a Leave's outcome (err: unknown).
	left(sid, group string, st spi.Status, err error)
	// members notes a keep-alive of sid, not expired, that named groups.
	members(sid string, groups []string)
	// read notes a successful Members read of group, which found members (sorted, as the
	// database returned them).
	read(group string, members []string)
}

// newConfig applies opts to the defaults, stopping at the first option that fails.
func newConfig(opts []Option) (config, error) {
	cfg := config{housekeeping: DefaultHousekeepingInterval}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

func newBackend(name string, d dialect, opts []Option) (*Backend, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	plans, err := compilePlans(name)
	if err != nil {
		return nil, err
	}
	var sink *adoptlog.Sink
	if cfg.logger == nil { // no WithLogger: slog.Default() until a client hands its own (AdoptLogger)
		cfg.logger, sink = adoptlog.New()
	}
	b := &Backend{d: d, name: name, plans: plans, cfg: cfg, logSink: sink, stop: make(chan struct{}), foreign: foreign.New(cfg.logger, "sql "+name)}
	if cfg.housekeeping > 0 {
		b.wg.Add(1)
		go b.housekeepingLoop(cfg.housekeeping)
	}
	return b, nil
}

// Dialect returns the backend's SQL dialect: "postgres", "mysql" or "sqlite" (the directory
// names of sql/schema).
func (b *Backend) Dialect() string { return b.name }

// MigrationPath is the path, within the repository's sql/schema directory (and schema.FS), of
// the migration that brings a database of this dialect to the schema the library needs, e.g.
// "postgres/0001_init.sql".
func (b *Backend) MigrationPath() string {
	d, _ := wire.SQLDialectByName(b.name)
	return d.Migration
}

// Close stops the backend's background work (housekeeping, the PostgreSQL hint listener) and
// closes the pool if Open created it. A pool passed to NewPostgres, NewMySQL or NewSQLite is left
// open. Sessions are not closed: they expire after their TTL unless CloseSession ends them.
// Close is idempotent; every later call of another method fails with spi.ErrBackendClosed.
//
// Close does not wait for the server: on a PostgreSQL pool Open created, the cleanups pgconn
// runs on connections that broke (a cancel request on a new connection, then Terminate, each
// waiting for the server to close its connection, up to the connect timeout or 15 s) are cut
// short, so that Close returns at once when the server is gone or the link silent (it took
// 4 to 8 s at the default connect timeout). A pool of your own waits for them when you close it.
func (b *Backend) Close() error {
	b.lifeMu.Lock()
	if b.closed.Swap(true) {
		b.lifeMu.Unlock()
		return nil
	}
	close(b.stop)
	b.lifeMu.Unlock()
	b.wg.Wait()
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
	return nil
}

func (b *Backend) checkOpen() error {
	if b.closed.Load() {
		return fmt.Errorf("sql %s: %w", b.name, spi.ErrBackendClosed)
	}
	return nil
}

// fail classifies err from op; nil stays nil.
func (b *Backend) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	if b.closed.Load() {
		return fmt.Errorf("sql %s: %s: %w (%w)", b.name, op, spi.ErrBackendClosed, err)
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("sql %s: %s: %w", b.name, op, err)
	}
	if errors.Is(err, spi.ErrSchemaMissing) || errors.Is(err, spi.ErrTokenOverflow) || errors.Is(err, spi.ErrCorruptToken) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return spi.Unavailable("sql "+b.name+" "+op, pgCauseFirst(err))
	}
	return b.d.classify("sql "+b.name+" "+op, err)
}

// schemaMissing is the error for a database without the schema this library needs: a table or
// column missing, the schema's version unknown. It names the first migration.
func (b *Backend) schemaMissing(why string, cause error) error {
	return b.schemaMissingFrom(-1, why, cause)
}

// noDatabase is schemaMissing for a DSN whose database does not exist (MySQL/MariaDB 1049,
// PostgreSQL 3D000; serverMsg is the server's message): it says to create the database first.
func (b *Backend) noDatabase(op, serverMsg string, cause error) error {
	return b.schemaMissing(fmt.Sprintf("%s: the DSN's database does not exist (%s): create it first (CREATE DATABASE name), then", op, serverMsg), cause)
}

// schemaMissingFrom is schemaMissing for a database at schema version v: it names the
// migrations after v to apply (all of them for v 0: a database without the version table), in
// order; for a negative v (unknown), the first one.
func (b *Backend) schemaMissingFrom(v int64, why string, cause error) error {
	apply := "sql/schema/" + b.MigrationPath()
	if v >= 0 {
		var paths []string
		for _, m := range schema.Migrations(b.name) {
			if int64(m.Version) > v {
				paths = append(paths, "sql/schema/"+m.Path)
			}
		}
		if len(paths) > 0 {
			apply = strings.Join(paths, ", then ")
		}
	}
	msg := fmt.Sprintf("%s: %s: apply %s (embedded in github.com/simba-go/simba/sql/schema) or call Migrate",
		spi.ErrSchemaMissing, why, apply)
	if cause != nil {
		return &schemaError{msg: msg, why: why, cause: cause, errs: []error{spi.ErrSchemaMissing, cause}}
	}
	return &schemaError{msg: msg, why: why, errs: []error{spi.ErrSchemaMissing}}
}

// schemaError is a schema error whose text already says what its causes say (why carries the
// server's message): it matches spi.ErrSchemaMissing and the driver's error (errors.Is,
// errors.As) without repeating them in its text, as a %w chain did ("schema missing: … or call
// Migrate: schema missing: <the server's message again>").
type schemaError struct {
	msg string
	// why and cause are what the error was made of (schemaMissingFrom's), so that it can be
	// made again naming other migrations.
	why   string
	cause error
	errs  []error
}

func (e *schemaError) Error() string   { return e.msg }
func (e *schemaError) Unwrap() []error { return e.errs }

// ready checks the schema once (or migrates it, WithAutoMigrate) before the first operation.
// An operation that only reads (readOnlyCtx: Inspect) never migrates: it checks.
func (b *Backend) ready(ctx context.Context) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	b.schemaMu.Lock()
	defer b.schemaMu.Unlock()
	if b.schemaOK {
		return nil
	}
	var err error
	if b.cfg.autoMigrate && !readOnly(ctx) {
		err = b.migrateLocked(ctx)
	} else {
		err = b.checkSchemaLocked(ctx)
	}
	if err == nil {
		b.schemaOK = true
	}
	return err
}

// CheckSchema reads the database's schema version and returns an error matching
// spi.ErrSchemaMissing, naming the migrations to apply in order, when the schema is missing or older than
// the library needs (schema.LatestVersion). It then compares the live tables with the schema
// the spec declares (wire.SQLSchemaCheckByName: columns with their types, lengths, collations
// and nullability, primary keys, foreign keys with their ON DELETE actions) and returns an error
// matching spi.ErrSchemaDrift (and spi.ErrSchemaMissing) that lists every difference. The
// backend runs the same check once, before its first operation. Other errors are classified like every call's
// (spi.ErrUnavailable when the database cannot be reached).
func (b *Backend) CheckSchema(ctx context.Context) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	b.schemaMu.Lock()
	defer b.schemaMu.Unlock()
	err := b.checkSchemaLocked(ctx)
	if err == nil {
		b.schemaOK = true
	}
	return err
}

func (b *Backend) checkSchemaLocked(ctx context.Context) error {
	v, err := b.schemaVersion(ctx)
	if err != nil {
		err = b.fail("schema version", err)
		if se := (*schemaError)(nil); errors.As(err, &se) && se.why != "" {
			// No version table in sight: a PostgreSQL role without USAGE on the schema
			// that holds it (hiddenTables), or a database without Simba's schema, which
			// needs every migration, in order (naming only the first sent whoever applied
			// it back here).
			if want, ok := wire.SQLSchemaCheckByName(b.name); ok {
				if denied := b.hiddenTables(ctx, "schema check", want, nil, se.cause); denied != nil {
					return denied
				}
			}
			return b.schemaMissingFrom(0, se.why, se.cause)
		}
		if errors.Is(err, spi.ErrSchemaMissing) || spi.Classify(err) == spi.Retryable {
			return err
		}
		// Another permanent error reading the version table (e.g. a privilege error) is
		// reported as it is.
		return err
	}
	if v < schema.LatestVersion {
		return b.schemaMissingFrom(v, fmt.Sprintf("schema version %d is older than %d", v, schema.LatestVersion), nil)
	}
	return b.checkDrift(ctx)
}

// Migrate applies the embedded migrations of the backend's dialect (schema.Migrations) that the
// database lacks, in order. Every migration is idempotent and Migrate serialises concurrent
// callers (a PostgreSQL advisory lock, a MySQL named lock, SQLite's write lock), so any number of
// clients may call it at once. It needs the privileges to create tables and indexes.
func (b *Backend) Migrate(ctx context.Context) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	b.schemaMu.Lock()
	defer b.schemaMu.Unlock()
	if err := b.migrateLocked(ctx); err != nil {
		return err
	}
	b.schemaOK = true
	return nil
}

func (b *Backend) migrateLocked(ctx context.Context) error {
	ms := schema.Migrations(b.name)
	if len(ms) == 0 {
		return spi.AsPermanent(fmt.Errorf("sql %s: no embedded migrations", b.name))
	}
	if err := b.d.migrate(ctx, ms); err != nil {
		if pgNoSchema(err) {
			// The search_path names no schema to create in: perhaps one the role may not
			// use (hiddenTables), which the search_path skips.
			if want, ok := wire.SQLSchemaCheckByName(b.name); ok {
				if denied := b.hiddenTables(ctx, "migrate", want, nil, err); denied != nil {
					return denied
				}
			}
		}
		return b.fail("migrate", err)
	}
	v, err := b.schemaVersion(ctx)
	if err != nil {
		return b.fail("schema version after migrate", err)
	}
	if v < schema.LatestVersion {
		return b.schemaMissingFrom(v, fmt.Sprintf("schema version %d after migrating, want %d", v, schema.LatestVersion), nil)
	}
	return b.checkDrift(ctx)
}

// SchemaVersion returns the highest schema version applied to the database (0 when the version
// table is empty). A missing version table is an error matching spi.ErrSchemaMissing.
func (b *Backend) SchemaVersion(ctx context.Context) (int64, error) {
	if err := b.checkOpen(); err != nil {
		return 0, err
	}
	v, err := b.schemaVersion(ctx)
	return v, b.fail("schema version", err)
}

// DatabaseNow returns the database clock, the one every lease decision uses, as UTC epoch
// milliseconds (PostgreSQL clock_timestamp(); MySQL/MariaDB the statement's start time; SQLite
// the host clock).
func (b *Backend) DatabaseNow(ctx context.Context) (int64, error) {
	if err := b.checkOpen(); err != nil {
		return 0, err
	}
	v, err := b.databaseNow(ctx)
	return v, b.fail("database now", err)
}

// newSessionID makes 128 random bits as 32 lowercase hex characters.
func newSessionID() (string, error) {
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// CheckTTL implements spi.TTLChecker: a ttl under one millisecond (the tables count whole
// milliseconds) is refused, with an error matching spi.ErrInvalidOption, as OpenSession
// refuses it before any I/O.
func (b *Backend) CheckTTL(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("%w: sql %s: session TTL %v is below one millisecond (the tables count whole milliseconds): use a TTL of at least 1ms (WithTTL, the CLI's -ttl)", spi.ErrInvalidOption, b.name, ttl)
	}
	return nil
}

// OpenSession opens a session with a client-made id (128 random bits), live for ttl by the
// database clock. ttl must be at least one millisecond (it is truncated to whole milliseconds);
// owner valid by wire.ValidateOwner (else the error matches spi.ErrInvalidOption and
// wire.ErrInvalidOwner).
func (b *Backend) OpenSession(ctx context.Context, owner string, ttl time.Duration) (spi.Session, error) {
	if err := b.CheckTTL(ttl); err != nil {
		return spi.Session{}, err
	}
	ttlMs := ttl.Milliseconds()
	if err := spi.ValidateOwner(owner); err != nil {
		return spi.Session{}, fmt.Errorf("sql %s: %w", b.name, err)
	}
	b.minTTL.Note(ttl)
	if err := b.ready(ctx); err != nil {
		return spi.Session{}, err
	}
	id, err := newSessionID()
	if err != nil {
		return spi.Session{}, spi.Unavailable("sql "+b.name+" open session: random id", err)
	}
	if err := b.openSession(ctx, id, owner, ttlMs); err != nil {
		return spi.Session{}, b.fail("open session", err)
	}
	if b.notes != nil {
		b.notes.opened(id, ttl)
	}
	return spi.Session{ID: spi.SessionID(id), Remaining: time.Duration(ttlMs) * time.Millisecond}, nil
}

// KeepAlive renews the session and lists every lease it holds (not only those in names) and the
// live members of groups, in a fixed number of statements whatever the number of leases: four
// pipelined in one round trip on PostgreSQL (one of them moves the session's waiter entries to
// its new expiry: spi.SessionQueue), four on MySQL/MariaDB, three on SQLite (one fewer when
// groups is empty; on MySQL/MariaDB and SQLite one more, after the renewal, which moves the
// entries, while the backend knows the session may have any). It then runs again the session's
// withdrawals that failed. After a failed keep-alive, the next one reads the database clock
// first, and sends nothing more if that round trip fails. A lease the session holds whose row
// has a token no tenure has (below 1, or on SQLite not an integer: written over by something
// else) is named in Corrupt, not Held, with a warning.
func (b *Backend) KeepAlive(ctx context.Context, session spi.SessionID, names []string, groups []string) (spi.KeepAlive, error) {
	for _, g := range groups {
		if err := wire.ValidateName(g); err != nil {
			return spi.KeepAlive{}, err
		}
	}
	if err := b.ready(ctx); err != nil {
		return spi.KeepAlive{}, err
	}
	// After a failed keep-alive, a round trip (the database clock, read-only) goes first: when
	// replies cannot come back but requests still arrive, a retried renewal sent on a pooled
	// connection would extend the session at the server while this client, seeing no reply,
	// gives its terms up at its deadline, leaving the leases held by nobody for up to a TTL
	// more. The probe fails instead, and the renewal is never sent.
	if b.kaFailed.Load() {
		if _, err := b.databaseNow(ctx); err != nil {
			return spi.KeepAlive{}, b.fail("keep-alive (round trip before a retried renewal)", err)
		}
	}
	ka, err := b.keepAlive(ctx, string(session), groups)
	b.kaFailed.Store(err != nil)
	if err != nil {
		return spi.KeepAlive{}, b.fail("keep-alive", err)
	}
	if b.notes != nil {
		b.notes.keptAlive(string(session), ka)
	}
	if ka.Expired {
		b.withdrawn.forget(string(session))
		b.queued.forget(string(session))
		return spi.KeepAlive{Expired: true}, nil
	}
	b.retryWithdrawals(ctx, string(session))
	for _, name := range ka.Corrupt {
		b.foreign.Warn("lease row of this session holds a token below 1 (or not an integer), written by something else; its term is revoked as corrupt-record, and the row needs an operator", "lease", name, "session", string(session))
	}
	if b.groupsN != nil {
		b.groupsN.members(string(session), groups)
	}
	if len(groups) > 0 {
		if ka.Members == nil {
			ka.Members = make(map[string][]spi.SessionID, len(groups))
		}
		for _, g := range groups {
			if _, ok := ka.Members[g]; !ok {
				ka.Members[g] = []spi.SessionID{}
			} else {
				ka.Members[g] = foreign.Members(b.foreign, g, ka.Members[g])
			}
		}
	}
	return ka, nil
}

// CloseSession releases every lease the session holds, drops its memberships and deletes it, in
// one statement on PostgreSQL (which notifies every released lease and left group) and one
// transaction elsewhere. Closing a session that is gone changes nothing.
func (b *Backend) CloseSession(ctx context.Context, session spi.SessionID) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	err := b.closeSession(ctx, string(session))
	if err == nil {
		b.withdrawn.forget(string(session)) // the close deleted its entries
		b.queued.forget(string(session))
	}
	if err == nil && b.notes != nil {
		b.notes.closed(string(session))
	}
	return b.fail("close session", err)
}

// Acquire takes the lease name for session if it is free or its holder's session expired by the
// database clock; a re-acquire by the holder returns the same token. A lease held by a session
// whose id is not of the form clients make (a row written by hand) is freed, keeping its token,
// with a warning, and acquired again; so is a free lease owed to a first waiter of such an id
// (its entry is dropped). A waiter entry whose session row is gone or expired, or whose expiry
// lies beyond its session's, is no entry a client made and is not waited for (spec/sql.yaml).
func (b *Backend) Acquire(ctx context.Context, session spi.SessionID, name string) (spi.Acquire, error) {
	seq := b.queued.at(string(session), name)
	r, err := b.acquireAs(ctx, "acquire", session, name)
	if err == nil && r.Kind == spi.Granted {
		b.queued.drop(string(session), name, seq) // a grant leaves the grantee no live entry
	}
	return r, err
}

// AcquireQueued implements spi.Queuer: Acquire for a session that waits, which (unless
// granted or expired) registers the session in name's waiter queue, or keeps its place, in
// the same transaction (spec/sql.yaml, operation acquire_queued).
func (b *Backend) AcquireQueued(ctx context.Context, session spi.SessionID, name string) (spi.Acquire, error) {
	// Waiting again: the entry, if the failed withdrawal left one, is its place; a withdrawal
	// of it in flight (a keep-alive's retry, a call abandoned) is let end first, so that it
	// cannot delete the entry this call makes (see withdrawals).
	if err := b.withdrawn.await(ctx, string(session), name); err != nil {
		return spi.Acquire{}, b.fail("acquire", err)
	}
	// Noted before it is sent: a keep-alive whose renewal commits before this call's entry is
	// made must find the session queued (keepAlive), or the entry keeps the expiry it had.
	seq := b.queued.note(string(session), name)
	r, err := b.acquireAs(ctx, "acquire_queued", session, name)
	switch {
	case err != nil: // the entry may have been made: kept
	case r.Kind == spi.Granted:
		b.queued.drop(string(session), name, seq) // the grant deleted the entry
	case r.Kind == spi.SessionExpired:
		b.queued.forget(string(session))
	}
	return r, err
}

// Withdraw implements spi.Queuer: it deletes session's entry from name's waiter queue, if
// any. The entry lives as long as its session (spi.SessionQueue), so a withdrawal that fails
// runs again with the session's next keep-alive, unless the session waits for the name again
// first (AcquireQueued). An AcquireQueued of the same session and name sent while it runs waits
// for its end.
func (b *Backend) Withdraw(ctx context.Context, session spi.SessionID, name string) error {
	if err := wire.ValidateName(name); err != nil {
		return err
	}
	b.withdrawn.begin(string(session), name)
	return b.withdrawBegun(ctx, session, name)
}

// withdrawBegun is Withdraw of a withdrawal begun (withdrawals.begin or claim), which it ends.
func (b *Backend) withdrawBegun(ctx context.Context, session spi.SessionID, name string) error {
	if err := b.ready(ctx); err != nil {
		b.withdrawn.end(string(session), name, true)
		return err
	}
	seq := b.queued.at(string(session), name)
	if err := b.withdraw(ctx, string(session), name); err != nil {
		b.withdrawn.end(string(session), name, true)
		return b.fail("withdraw", err)
	}
	b.queued.drop(string(session), name, seq)
	if b.notes != nil {
		b.notes.withdrawn(string(session), name)
	}
	// Last: an AcquireQueued waiting for this end notes its entry and its hints after it.
	b.withdrawn.end(string(session), name, false)
	return nil
}

// EndWait implements spi.WaitEnder: session no longer waits for name (a TryLock that found it
// held gave up). It sends no statement: the backend stops hinting the name to the session, and
// drops the name's LISTEN (PostgreSQL, after its linger), its place in the SQLite waker's poll,
// or its blocking named-lock wait (MySQL/MariaDB) once no session of the backend waits for it.
func (b *Backend) EndWait(session spi.SessionID, name string) {
	if b.notes != nil {
		b.notes.withdrawn(string(session), name)
	}
}

// acquireAs runs the acquire operation op (acquire or acquire_queued).
func (b *Backend) acquireAs(ctx context.Context, op string, session spi.SessionID, name string) (spi.Acquire, error) {
	if err := wire.ValidateName(name); err != nil {
		return spi.Acquire{}, err
	}
	if err := b.ready(ctx); err != nil {
		return spi.Acquire{}, err
	}
	r, owed, err := b.acquireOwed(ctx, op, string(session), name)
	// A foreign holder or first waiter: a session row, or a waiter entry, of an id no client
	// makes (written by hand or by something else), which no Simba client relies on. It would
	// block the name until its expiry, possibly for ever: free the lease, keeping its token, or
	// drop the entry, and acquire again (a few times: each round clears one such record).
	for range maxForeignCleared {
		if err != nil || r.Kind != spi.HeldBy || wire.IsClientSessionID(string(r.Holder)) {
			break
		}
		if owed {
			b.foreign.Warn("first waiter of the lease is not a client session id; its entry is dropped", "lease", name, "waiter", string(r.Holder))
			err = b.withdraw(ctx, string(r.Holder), name)
		} else {
			b.foreign.Warn("lease holder is not a client session id; freeing the lease (its token is kept)", "lease", name, "holder", string(r.Holder))
			err = b.clearForeignHolder(ctx, name, string(r.Holder))
		}
		if err != nil {
			return spi.Acquire{}, b.fail("acquire: clear foreign record", err)
		}
		r, owed, err = b.acquireOwed(ctx, op, string(session), name)
	}
	if err != nil {
		return spi.Acquire{}, b.fail("acquire", err)
	}
	b.noteAcquired(string(session), name, r)
	return r, nil
}

// maxForeignCleared bounds the foreign records (holders, waiter entries) one acquire clears
// before it replies with what it finds.
const maxForeignCleared = 8

// noteAcquired tells the notes (if any) the reply an acquire returns.
func (b *Backend) noteAcquired(sid, name string, r spi.Acquire) {
	if b.notes != nil {
		b.notes.acquired(sid, name, r)
	}
}

// Release frees name if session holds it with token (on PostgreSQL with a NOTIFY); otherwise it
// changes nothing. The backend's own Hints subscribers (other clients in this process on this
// backend) get a Released hint at once, without waiting for the server's (on PostgreSQL only
// when a session of the backend waits for name).
func (b *Backend) Release(ctx context.Context, session spi.SessionID, name string, token int64) error {
	if err := wire.ValidateName(name); err != nil {
		return err
	}
	if err := b.ready(ctx); err != nil {
		return err
	}
	if err := b.release(ctx, string(session), name, token); err != nil {
		return b.fail("release", err)
	}
	b.releasedLocally(string(session), name)
	return nil
}

// Join makes session a member of group while it is live.
func (b *Backend) Join(ctx context.Context, session spi.SessionID, group string) (spi.Status, error) {
	return b.joinLeave(ctx, "join", session, group, b.join)
}

// Leave removes session from group.
func (b *Backend) Leave(ctx context.Context, session spi.SessionID, group string) (spi.Status, error) {
	return b.joinLeave(ctx, "leave", session, group, b.leave)
}

func (b *Backend) joinLeave(ctx context.Context, op string, session spi.SessionID, group string,
	f func(ctx context.Context, sid, group string) (bool, error)) (spi.Status, error) {
	if err := wire.ValidateName(group); err != nil {
		return 0, err
	}
	if err := b.ready(ctx); err != nil {
		return 0, err
	}
	sid := string(session)
	if b.groupsN != nil && op == "join" {
		b.groupsN.joining(sid, group)
	}
	st, err := b.joinLeaveStatus(ctx, op, sid, group, f)
	if b.groupsN != nil {
		if op == "join" {
			b.groupsN.joined(sid, group, st, err)
		} else {
			b.groupsN.left(sid, group, st, err)
		}
	}
	return st, err
}

// joinLeaveStatus runs the join or leave f and turns its outcome into a status.
func (b *Backend) joinLeaveStatus(ctx context.Context, op, sid, group string,
	f func(ctx context.Context, sid, group string) (bool, error)) (spi.Status, error) {
	live, err := f(ctx, sid, group)
	if err != nil {
		return 0, b.fail(op, err)
	}
	if !live {
		return spi.Expired, nil
	}
	return spi.OK, nil
}

// Members lists the live members of group, sorted ascending (bytewise). A member whose session
// id is not of the form clients make (a row written by hand) is skipped with a warning, in
// KeepAlive too: it would take partitions nobody leads. For wire.ProbeGroup (the client's
// outage probe) it also checks that the server takes writes (checkWritable): a read-only
// server fails the probe with an error naming read-only.
func (b *Backend) Members(ctx context.Context, group string) ([]spi.SessionID, error) {
	if err := wire.ValidateName(group); err != nil {
		return nil, err
	}
	if err := b.ready(ctx); err != nil {
		return nil, err
	}
	ids, err := b.members(ctx, group)
	if err != nil {
		return nil, b.fail("members", err)
	}
	if group == wire.ProbeGroup {
		if err := b.checkWritable(ctx); err != nil {
			return nil, err
		}
	}
	if b.groupsN != nil && group != wire.ProbeGroup { // the client's probe: nothing to LISTEN for
		b.groupsN.read(group, ids)
	}
	ids = foreign.Members(b.foreign, group, ids)
	out := make([]spi.SessionID, len(ids))
	for i, id := range ids {
		out[i] = spi.SessionID(id)
	}
	return out, nil
}

// checkWritable fails, retryably, when the server answers but refuses writes (the dialect's
// wire.SQLDialect.ReadOnlyCheck; none on SQLite). Members runs it for the client's outage
// probe (wire.ProbeGroup): the probe's read alone succeeded on a read-only server (a hot
// standby after a failover, default_transaction_read_only, MySQL/MariaDB read_only), so the
// client took the backend for reachable again, retried its session's calls at once, and they
// failed again; now the outage lasts until the server takes writes. A user whose writes the
// read-only setting does not bind is not held up by it (wire.SQLDialect.ReadOnlyWriteCheck).
func (b *Backend) checkWritable(ctx context.Context) error {
	wd, _ := wire.SQLDialectByName(b.name)
	if wd.ReadOnlyCheck == "" {
		return nil
	}
	rows, err := b.d.catalog(ctx, wd.ReadOnlyCheck, 1)
	if err != nil {
		return b.fail("members (probe: read-only check)", err)
	}
	if len(rows) != 1 || rows[0][0] == "" {
		return nil
	}
	if wd.ReadOnlyWriteCheck != "" {
		// A user the read-only setting does not bind (MariaDB's READ_ONLY ADMIN) writes
		// while the check above says read-only: the server's answer to a write that
		// changes nothing is the verdict (one that refuses it for another reason, a
		// missing UPDATE grant, leaves the check's).
		if _, err := b.d.catalog(ctx, wd.ReadOnlyWriteCheck, 0); err == nil {
			return nil
		} else if c := b.fail("members (probe: read-only write check)", err); spi.Classify(c) == spi.Retryable && !errors.As(c, new(*readOnlyError)) {
			return c
		}
	}
	hint := pgReadOnlyHint
	if b.name == wire.SQLMySQL {
		hint = mysqlReadOnlyHint
	}
	return spi.Unavailable("sql "+b.name+" members (probe)", errReadOnly(hint, fmt.Errorf("the server answers reads but refuses writes: %s", rows[0][0])))
}

// Housekeeping deletes the memberships of expired sessions, then the expired sessions that hold
// no lease (two statements). Lease rows are never deleted: the lease of an expired session stays
// with it, free for any acquirer to take over, so that its token keeps growing. The backend runs
// it in the background (see WithHousekeepingInterval); if a deadlock with a concurrent acquire
// rolls it back it runs again.
func (b *Backend) Housekeeping(ctx context.Context) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	return b.fail("housekeeping", b.housekeeping(ctx))
}

func (b *Backend) housekeepingLoop(every time.Duration) {
	defer b.wg.Done()
	for {
		wait := every + rand.N(every/10+1)
		t := time.NewTimer(wait)
		select {
		case <-b.stop:
			t.Stop()
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		go func() {
			select {
			case <-b.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		_ = b.Housekeeping(ctx) // failures are retried on the next period
		cancel()
	}
}

// Inspect lists every lease (with holder, owner, token and the holder's time left; a lease whose
// holder expired is shown free), every live session and every group's live members, for status
// tools. It reads three statements, not one snapshot, so a lease may name a session the session
// list no longer has. It only reads: it never migrates (WithAutoMigrate or not: a database
// without the schema is an error matching spi.ErrSchemaMissing that names the migration). On
// SQLite it changes nothing on the file: it does not take the cross-process gate of writers,
// whose sidecar ("<file>-simba-gate") the first operation that may write creates, and does
// not switch the journal mode to WAL, which Open's backend does at the first operation that
// may write.
func (b *Backend) Inspect(ctx context.Context) (spi.Snapshot, error) {
	ctx = readOnlyCtx(ctx)
	if err := b.ready(ctx); err != nil {
		return spi.Snapshot{}, err
	}
	s, err := b.inspect(ctx)
	if err != nil {
		return spi.Snapshot{}, b.fail("inspect", err)
	}
	return s, nil
}

// InspectLease reads the lease called name as Inspect lists it (spi.LeaseInspector): one
// statement (inspect_lease), the lease's row by its primary key joined to its holder's session,
// whatever the number of leases; a holder that expired is shown free, and a name that has no
// lease row is not found. Like Inspect it only reads: it never migrates, and on SQLite it
// neither takes the writers' gate nor switches the journal mode. A name outside the wire
// grammar is refused before any I/O.
func (b *Backend) InspectLease(ctx context.Context, name string) (spi.LeaseInfo, bool, error) {
	if err := wire.ValidateName(name); err != nil {
		return spi.LeaseInfo{}, false, err
	}
	ctx = readOnlyCtx(ctx)
	if err := b.ready(ctx); err != nil {
		return spi.LeaseInfo{}, false, err
	}
	info, ok, err := b.inspectLease(ctx, name)
	if err != nil {
		return spi.LeaseInfo{}, false, b.fail("inspect lease", err)
	}
	return info, ok, nil
}

// Hints delivers, until ctx is done, a Released hint for every release (including those of a
// closed session) of a lease that a session of this backend waits for, and on PostgreSQL for
// every Withdraw of the waiter such a free lease was owed to (it NOTIFYs as a release does),
// and a GroupChanged hint
// for every join or leave, by any client, of a group a session of this backend takes part in;
// then it closes the channel. A hint may repeat, and may be spurious. PostgreSQL pushes hints
// (LISTEN/NOTIFY on a dedicated connection that reconnects by itself; hints sent while it is
// down are lost, and one hint per waited name and per group follows each reconnect). It LISTENs
// on a lease's own release channel (wire.SQLLeaseChannel) from an Acquire or AcquireQueued that
// replies HeldBy until the waiting session is granted the lease, withdraws, closes or is found
// expired, or makes no acquire of the name for two of its TTLs (the engine re-attempts within
// one), and on a group's own channel (wire.SQLGroupOwnChannel) from a Join being sent until the
// joining session leaves (or its Join answers Expired), closes or is found expired, or makes no
// Join nor keep-alive naming the group for two of its TTLs (it keeps alive every third of one),
// and for a second after a Members read of the group; a channel no longer needed is UNLISTENed
// a second later. So a release wakes only the clients that wait for that name, and a
// membership change only those in the group, not every client of the database. A release
// committed between the HeldBy reply and the LISTEN taking effect notifies nobody here, so once
// a LISTEN is in, the backend delivers one Released hint for the name (the engine attempts
// again: a spurious hint costs an acquire); likewise one GroupChanged hint for a group (its
// members read the members again). A release or membership change by a client of an earlier
// 5.x release notifies only the shared channels, which this backend no longer LISTENs on: its
// waiters learn of it at their retry, its members at their next keep-alive. SQLite and MySQL/MariaDB
// deliver wake-ups instead, for the names an acquire of this backend found held (for two
// session TTLs after): SQLite reads PRAGMA data_version on a connection of its own when the
// database file is written (inotify on Linux, a 2 ms stat poll elsewhere) and sends a Released
// hint for each of those leases that is free, and, for two session TTLs after a session of the
// backend joined a group, a GroupChanged hint when the group's members changed (sqlitewake.go); MySQL/MariaDB block in GET_LOCK
// on the named lock that the holder's backend keeps for its tenure, and send a Released hint
// when they get it (mysqlwake.go). Every dialect also sends its own subscribers a Released
// hint at once when this backend releases a lease.
func (b *Backend) Hints(ctx context.Context) (<-chan spi.Hint, error) {
	b.lifeMu.Lock()
	defer b.lifeMu.Unlock()
	if err := b.checkOpen(); err != nil {
		return nil, err
	}
	if b.waker != nil {
		return b.waker.hints(ctx, b.stop, &b.wg)
	}
	if h, ok := b.d.(interface {
		hints(ctx context.Context, stop <-chan struct{}, wg *sync.WaitGroup) (<-chan spi.Hint, error)
	}); ok {
		return h.hints(ctx, b.stop, &b.wg)
	}
	ch := make(chan spi.Hint)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		select {
		case <-ctx.Done():
		case <-b.stop:
		}
		close(ch)
	}()
	return ch, nil
}

// PushesHints reports whether Hints delivers the server's own notifications: a hint for every
// release of a name this backend's sessions wait for and every membership change of a group
// they take part in (PostgreSQL
// only; the wake-ups of SQLite and MySQL/MariaDB cover the names its acquires found held, and
// no membership change).
func (b *Backend) PushesHints() bool { return b.name == wire.SQLPostgres }

// tokenOverflow is the permanent error for a lease whose stored token has no successor.
func tokenOverflow(name string, token int64) error {
	return spi.AsPermanent(fmt.Errorf("%w: lease %q holds token %d, which has no successor (nothing written)", spi.ErrTokenOverflow, name, token))
}

// tokenNotInteger is the permanent error for a lease whose stored token is no integer (SQLite
// keeps any value in any column: a text or blob written by another program).
func tokenNotInteger(name string) error {
	return spi.AsPermanent(fmt.Errorf("%w: lease %q holds a token that is not an integer (nothing written)", spi.ErrCorruptToken, name))
}

// tokenOfNoTenure is the permanent error for a re-acquire of a lease the caller holds whose
// stored token no tenure has (below 1; on SQLite also a text, read as 0).
func tokenOfNoTenure(name string, token int64) error {
	return spi.AsPermanent(fmt.Errorf("%w: lease %q, held by this session, holds the token %d, which no tenure has (nothing written)", spi.ErrCorruptToken, name, token))
}

// corruptToken is the permanent error for a lease whose stored token is negative.
func corruptToken(name string, token int64) error {
	return spi.AsPermanent(fmt.Errorf("%w: lease %q holds the negative token %d (nothing written)", spi.ErrCorruptToken, name, token))
}

// millis converts a reply's milliseconds to a Duration, saturating (spi.Millis).
func millis(ms int64) time.Duration { return spi.Millis(ms) }

// leaseInfo turns an inspected lease row into a LeaseInfo; an expired holder is shown free. A
// row no client could have written is never shown free, nor its token verified: it comes back
// with Unreadable saying why (spi.LeaseInfo), as the Redis backend shows its forged hashes and
// as an acquire treats the row: a negative token fails every acquire (ErrCorruptToken), a free
// row (or one whose holder expired) at the int64 maximum fails every acquire (ErrTokenOverflow;
// a live holder's row there is shown held, as it is: its holder keeps the token), a live holder
// that is not a client session id is freed by the next one, a session expiry beyond any TTL
// keeps the name held until it passes.
func leaseInfo(name, holder, owner string, token, remainingMs int64) spi.LeaseInfo {
	unreadable := func(format string, args ...any) spi.LeaseInfo {
		return spi.LeaseInfo{Name: name, Holder: spi.SessionID(holder), Owner: owner, Token: token,
			RemainingUnknown: true, Unreadable: fmt.Sprintf(format, args...)}
	}
	if token < 0 {
		return unreadable("token %d is negative (acquires fail with spi.ErrCorruptToken)", token)
	}
	if holder == "" || remainingMs <= 0 {
		if token == math.MaxInt64 {
			// Free to take, but no acquire can: its next tenure has no token (a row at the
			// maximum held by a live session is held, above, and its holder keeps the token).
			l := unreadable("token %d is the int64 maximum, which has no successor (acquires fail with spi.ErrTokenOverflow)", token)
			l.Holder, l.Owner = "", ""
			return l
		}
		return spi.LeaseInfo{Name: name, Token: token}
	}
	if !wire.IsClientSessionID(holder) {
		return unreadable("holder %q is not a client session id (the next acquire frees the lease, keeping its token)", holder)
	}
	if token == 0 {
		// Held at a token no tenure has (a free row starts at 0; a grant raises it): its
		// holder's keep-alive names it corrupt and its re-acquire fails.
		return unreadable("token 0 is no tenure's token (its holder's term is revoked as corrupt-record)")
	}
	if left := millis(remainingMs); left > spi.MaxSessionTTL {
		return unreadable("session expiry %v away, beyond the longest session TTL (%v)", left.Round(time.Second), spi.MaxSessionTTL)
	}
	return spi.LeaseInfo{Name: name, Holder: spi.SessionID(holder), Owner: owner, Token: token, Remaining: millis(remainingMs)}
}

// memberMap makes the Members map of a keep-alive reply.
func memberMap(n int) map[string][]spi.SessionID { return make(map[string][]spi.SessionID, n) }

// rolledBackAttempts bounds how often an operation runs when the database keeps choosing it as
// a deadlock victim; after the last attempt the error goes up as retryable (ErrUnavailable).
const rolledBackAttempts = 4

// retryRolledBack runs op, and runs it again (after a short random pause, so that the two
// transactions that deadlocked do not meet again in step) while rolledBack (nil: never) says
// the database rolled op back to break a deadlock. Such an answer is certain: nothing of op
// took effect, so running it again is safe, and it saves the caller an outcome-unknown error
// for what is routine under contention (InnoDB's advice: be ready to re-issue a transaction
// that failed with a deadlock). A deadlock between an acquire (lease row, then the holder's
// session row) and the holder's own release or close (session row, then lease rows) cannot be
// ordered away: the acquire learns which session row to lock only by reading the lease row.
// On PostgreSQL the same cycle needs a close (its DELETE locks the session row, then its
// cascade the lease rows); every PostgreSQL operation is one statement or one pipelined batch,
// rolled back whole.
func retryRolledBack(ctx context.Context, rolledBack func(error) bool, op func() error) error {
	for attempt := 1; ; attempt++ {
		err := op()
		if err == nil || rolledBack == nil || !rolledBack(err) || attempt == rolledBackAttempts {
			return err
		}
		pause := time.NewTimer(time.Duration(rand.Int64N(int64(attempt) * int64(2*time.Millisecond))))
		select {
		case <-ctx.Done():
			pause.Stop()
			return err
		case <-pause.C:
		}
	}
}

// AdoptLogger implements spi.LoggerAdopter: a backend made without WithLogger logs its
// warnings to l from now on (simba.New hands it the client's simba.WithLogger), where it
// logged to slog.Default(); one given WithLogger keeps that logger. (go-sql-driver/mysql's own
// DEBUG lines of a backend Open made without WithLogger stay with slog.Default().)
func (b *Backend) AdoptLogger(l *slog.Logger) {
	b.logSink.Adopt(l)
}

// log is where the backend logs warnings (WithLogger; slog.Default() by default, or the
// logger AdoptLogger handed it).
func (b *Backend) log() *slog.Logger {
	if b.cfg.logger != nil {
		return b.cfg.logger
	}
	return slog.Default()
}
