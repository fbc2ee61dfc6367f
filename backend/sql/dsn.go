package sql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/spi"

	dsnutil "github.com/simba-go/simba/internal/dsn"
)

// Open returns a backend on a pool it opens from dsn (and Close closes):
//
//	postgres://user:password@host:port/db?param=value...      PostgreSQL (also postgresql://)
//	mysql://user:password@host:port/db?param=value...         MySQL 8 / MariaDB 10.11
//	sqlite:///absolute/path.db?param=value...                  SQLite (sqlite://relative/path.db; sqlite3:// too)
//
// PostgreSQL: the DSN is pgx's (pgxpool.ParseConfig: pool_max_conns, sslmode, search_path,
// connect_timeout, ...); every connection runs the session setup (PostgresAfterConnect).
// connect_timeout is DefaultConnectTimeout (5 s) unless the DSN (or PGCONNECT_TIMEOUT) sets it;
// connect_timeout=0 is no timeout, as in libpq. A connect started by a call is bounded by
// twice the time the call had left when that is less than the connect timeout; the bound of a
// connection's connect also bounds how long it keeps its slot of the pool, once it broke (a
// statement cut short by its context), while pgx cleans it up (pgx's own bound: 15 s), and the
// session setup (see the package doc, Timeouts, and PostgresPoolConfig). Every statement is
// bounded by its call's context.
//
// MySQL/MariaDB: user, password (percent-encoded), host (default port 3306) and database are
// translated to go-sql-driver/mysql's form; the parameters are go-sql-driver's (tls, timeout,
// readTimeout, ...), with interpolateParams=true unless the DSN says otherwise (one round trip per
// statement instead of three), and timeout (the dial timeout) DefaultConnectTimeout unless the
// DSN sets it (timeout=0: the system's); a negative timeout, readTimeout, writeTimeout or
// timeTruncate is refused, and so is a maxAllowedPacket other than 0 (ask the server) outside
// the server's own range, 1 KiB to 1 GiB. readTimeout and writeTimeout stay unset: every
// statement is bounded by its call's context (go-sql-driver closes a connection whose context
// ends mid-statement), and a read timeout would cut the waker's GET_LOCK waits, which last up to
// a TTL. The database name is required.
//
// SQLite: the path is a file name (created if missing, unless mode=rw: an existing file only);
// the parameters are SQLite's URI parameters and modernc.org/sqlite's (_pragma=..., mode=ro is
// refused by the first write); an unknown one (a typo SQLite would ignore) is refused, and so is
// a mattn-style shorthand (_busy_timeout=..., _journal_mode=...: write _pragma=name(value));
// each _pragma must be name(value) (or name=value) naming a pragma that sets something, as
// SQLite ignores an unknown pragma, and takes a bare name as a query, without a word.
// A connection SQLite opened read-only because the file or its directory was not writable then
// is dropped at its first refused write once they are writable again (the call is retried),
// unless the DSN asks for mode=ro. When SQLite cannot open the file, the error names it and,
// when it can tell, why (its
// directory does not exist; no such file, with mode=rw). Open adds _pragma=busy_timeout(10000)
// and _pragma=foreign_keys(1) (the dialect's session setup) unless the DSN sets them itself,
// and, unless the DSN sets a journal_mode, puts the database in WAL mode (readers do not block
// the writer) at its first operation that may write: Inspect (simba status) leaves the file's
// journal mode as it is. Switching a file that already holds tables from another mode (made
// by the sqlite3 shell, or another program) logs a warning naming that mode; to keep it, put
// _pragma=journal_mode(<mode>) in the DSN. An in-memory database (:memory:,
// mode=memory) is refused: it lives and dies with one connection of one process, so there is
// nothing to coordinate; use a file, or NewSQLite on your own pool.
//
// Errors in the DSN match spi.ErrInvalidOption, say what is wrong and never show the password.
// Open does no I/O (connections are made on first use) unless WithAutoMigrate is given: then it
// applies the migrations with ctx before returning.
func Open(ctx context.Context, dsn string, opts ...Option) (*Backend, error) {
	scheme, _, ok := strings.Cut(dsn, "://")
	if !ok || !dsnutil.ValidScheme(scheme) {
		return nil, dsnutil.Errorf(spi.ErrInvalidOption, "sql DSN", dsn, "want postgres://, postgresql://, mysql:// or sqlite://")
	}
	var (
		b   *Backend
		err error
	)
	switch scheme {
	case "postgres", "postgresql":
		b, err = openPostgres(dsn, opts)
	case "mysql":
		b, err = openMySQL(dsn, opts)
	case "sqlite", "sqlite3":
		b, err = openSQLite(dsn, opts)
	default:
		return nil, dsnutil.Errorf(spi.ErrInvalidOption, "sql DSN", dsn, "unknown scheme %q (want postgres, postgresql, mysql or sqlite)", scheme)
	}
	if err != nil {
		return nil, err
	}
	if b.cfg.autoMigrate {
		if err := b.Migrate(ctx); err != nil {
			b.Close()
			return nil, err
		}
	}
	return b, nil
}

func openPostgres(dsn string, opts []Option) (*Backend, error) {
	cfg, cut, err := postgresPoolConfig(dsn)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, dsnutil.Errorf(spi.ErrInvalidOption, "sql postgres DSN", dsn, "%v", err)
	}
	b, err := NewPostgres(pool, opts...)
	if err != nil {
		pool.Close()
		return nil, err
	}
	b.closers = append(b.closers, func() {
		// The pool is the backend's alone: its Close waits for every connection's cleanup,
		// which on a link gone silent is a cancel request and a Terminate each waiting for
		// the server, up to the connect timeout apiece (connCut); the backend is done with the
		// server, so they end at once.
		cut.cutAll()
		pool.Close()
	})
	return b, nil
}

// PostgresPoolConfig parses a postgres:// (or postgresql://) DSN into the pgxpool configuration
// Open makes its pool from (see Open): pgx's parameters, PostgresAfterConnect, connect_timeout
// DefaultConnectTimeout unless the DSN (or PGCONNECT_TIMEOUT) sets it, and the bounds on what a
// connection holds its pool slot for while the server's replies are lost (its connect and its
// cleanup after it broke: the connect timeout, or twice the time the backend's call that
// started the connect had left, whichever is less; with connect_timeout=0, no timeout as in
// libpq, neither bound applies and NewPostgres warns). Use it for a pool of your own given to
// NewPostgres: change what you need (MaxConns, a tracer, ...) but keep, or wrap, its DialFunc,
// AfterNetConnect, BeforeConnect and AfterConnect, which carry those bounds, the session
// setup and what lets a call that runs out of time close the pool's connections a silent link
// left (see the package doc, Outages). Errors match spi.ErrInvalidOption and never show the password.
func PostgresPoolConfig(dsn string) (*pgxpool.Config, error) {
	cfg, _, err := postgresPoolConfig(dsn)
	return cfg, err
}

// postgresPoolConfig is PostgresPoolConfig, with the connCut of the pool's connections
// (nil without a connect timeout, when nothing is bounded): Open cuts them when the backend
// that owns the pool closes.
func postgresPoolConfig(dsn string) (*pgxpool.Config, *connCut, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, nil, dsnutil.Errorf(spi.ErrInvalidOption, "sql postgres DSN", dsn, "%s", pgParseMessage(err))
	}
	// pgx takes any text as a host and dials it (a unix socket when it starts with '/'): a
	// host that cannot be one fails every connect as if the server were down, and a client
	// retries that for ever. Refuse it here, as the other schemes do.
	for _, h := range pgHosts(cfg) {
		if err := dsnutil.CheckHostName(h, "host"); err != nil {
			return nil, nil, dsnutil.Errorf(spi.ErrInvalidOption, "sql postgres DSN", dsn, "%v", err)
		}
	}
	cfg.AfterConnect = PostgresAfterConnect
	if !pgSetsConnectTimeout(dsn) {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	stampPgConns(cfg)
	cut := boundPgConnects(cfg)
	return cfg, cut, nil
}

// pgHosts returns the network hosts cfg dials, its fallbacks' included: not unix socket
// directories (a path).
func pgHosts(cfg *pgxpool.Config) []string {
	var out []string
	add := func(h string) {
		if h != "" && !strings.HasPrefix(h, "/") {
			out = append(out, h)
		}
	}
	add(cfg.ConnConfig.Host)
	for _, f := range cfg.ConnConfig.Fallbacks {
		add(f.Host)
	}
	return out
}

// pgSetsConnectTimeout reports whether the DSN (or the environment, PGCONNECT_TIMEOUT, which
// pgx reads too) sets the connect timeout, even to 0 (no timeout, as in libpq).
func pgSetsConnectTimeout(dsn string) bool {
	if _, ok := os.LookupEnv("PGCONNECT_TIMEOUT"); ok {
		return true
	}
	u, err := url.Parse(dsn)
	return err == nil && u.Query().Has("connect_timeout")
}

// pgParseMessage is what pgx says is wrong with a DSN, without the DSN it quotes ("cannot parse
// `<the DSN, redacted by pgx's own rules>`: <what is wrong>"; the caller scrubs what is left).
func pgParseMessage(err error) string {
	msg := err.Error()
	var pce *pgconn.ParseConfigError
	if rest, ok := strings.CutPrefix(msg, "cannot parse `"); ok && errors.As(err, &pce) {
		if _, what, ok := strings.Cut(rest, "`: "); ok {
			return what
		}
	}
	return msg
}

// mysqlMinPacket and mysqlMaxPacket bound max_allowed_packet in MySQL 8 and MariaDB 10.11 (1 KiB
// to 1 GiB): the range MySQLConfig accepts for the DSN's maxAllowedPacket.
const (
	mysqlMinPacket = 1 << 10
	mysqlMaxPacket = 1 << 30
)

// MySQLConfig translates a mysql:// DSN into go-sql-driver/mysql's configuration (see Open:
// interpolateParams and timeout have Open's defaults).
func MySQLConfig(dsn string) (*mysqldriver.Config, error) {
	bad := func(format string, args ...any) (*mysqldriver.Config, error) {
		return nil, dsnutil.Errorf(spi.ErrInvalidOption, "sql mysql DSN", dsn, format, args...)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return bad("not a URL (percent-encode reserved characters in the user and password)")
	}
	if u.Scheme != "mysql" {
		return bad("scheme %q, want mysql", u.Scheme)
	}
	if u.Opaque != "" {
		return bad("want mysql://user:password@host:port/database")
	}
	if _, err := url.ParseQuery(u.RawQuery); err != nil {
		return bad("bad parameters: %v", err)
	}
	cfg := mysqldriver.NewConfig()
	if u.RawQuery != "" {
		parsed, err := mysqldriver.ParseDSN("/?" + u.RawQuery)
		if err != nil {
			return bad("bad parameter: %v", err)
		}
		cfg = parsed
	}
	// go-sql-driver takes any duration time.ParseDuration reads, negative ones included: a
	// negative dial timeout makes every connect fail at once ("i/o timeout", which looks like a
	// network fault), a negative read or write timeout every statement. Refuse them here, naming
	// the parameter, rather than let the user chase an outage that is a typo.
	for _, p := range []struct {
		name string
		d    time.Duration
	}{
		{"timeout", cfg.Timeout},
		{"readTimeout", cfg.ReadTimeout},
		{"writeTimeout", cfg.WriteTimeout},
	} {
		if p.d < 0 {
			vals := u.Query()[p.name] // go-sql-driver keeps the last
			return bad("parameter %s=%q is negative: want a positive duration, or 0 to leave it unset", p.name, vals[len(vals)-1])
		}
	}
	// timeTruncate is kept in a field of go-sql-driver's that is not exported: read it again
	// from the DSN (go-sql-driver has parsed it already, so it parses). Negative, it truncates
	// nothing and means nothing.
	if vals := u.Query()["timeTruncate"]; len(vals) > 0 {
		if d, err := time.ParseDuration(vals[len(vals)-1]); err == nil && d < 0 {
			return bad("parameter timeTruncate=%q is negative: want a positive duration, or 0 to leave times as they are", vals[len(vals)-1])
		}
	}
	// maxAllowedPacket is the largest packet the driver sends, 0 to ask the server; go-sql-driver
	// takes any integer. Negative it asks the server too, without a word; below the server's own
	// minimum every statement that fills a packet fails as too large; above the server's own
	// maximum the server refuses what the driver sends. Take only what a server could say.
	if p := cfg.MaxAllowedPacket; p != 0 && (p < mysqlMinPacket || p > mysqlMaxPacket) {
		vals := u.Query()["maxAllowedPacket"]
		return bad("parameter maxAllowedPacket=%q is out of range: want 0 (ask the server) or %d to %d bytes, the server's own max_allowed_packet range",
			vals[len(vals)-1], mysqlMinPacket, mysqlMaxPacket)
	}
	if !u.Query().Has("interpolateParams") {
		cfg.InterpolateParams = true
	}
	if !u.Query().Has("timeout") {
		cfg.Timeout = DefaultConnectTimeout
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	if u.Host == "" {
		return bad("no host")
	}
	// go-sql-driver dials whatever it is given: a host that cannot be one, or a port out of
	// range, fails every connect as if the server were down, and a client retries that for
	// ever. Refuse them here, as the other schemes do (NormaliseHost: theirs too).
	host, err := dsnutil.NormaliseHost(u.Host, 3306, "host")
	if err != nil {
		return bad("%v", err)
	}
	cfg.Net, cfg.Addr = "tcp", host
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if cfg.DBName == "" || strings.Contains(cfg.DBName, "/") {
		return bad("name one database: mysql://user:password@host:port/database")
	}
	return cfg, nil
}

func openMySQL(dsn string, opts []Option) (*Backend, error) {
	cfg, err := MySQLConfig(dsn)
	if err != nil {
		return nil, err
	}
	// The options' logger (an option's error is NewMySQL's to report, below).
	oc, _ := newConfig(opts)
	routeMySQLDriverLog(cfg, oc.logger)
	// The calls' pool dials connections that note when they last read and wrote, for
	// stdDialect.dropSilent (see the package doc, Outages); NewMySQL gives the waker a pool
	// of its own.
	conn, err := MySQLConnector(cfg)
	if err != nil {
		return nil, dsnutil.Errorf(spi.ErrInvalidOption, "sql mysql DSN", dsn, "%v", err)
	}
	db := sql.OpenDB(conn)
	// database/sql keeps 2 idle connections by default, and a client keeps up to
	// mysqlPoolIdle calls in flight: every connection past the second that a burst of calls
	// used was closed as it came back, and dialled again by the next burst (a TCP and MySQL
	// handshake: several round trips; 3 clients' pools closed 509 so in 8 s of
	// bench/cmd/rtts -churn on MariaDB, of 1130 new connections). Idle ones go after
	// mysqlPoolIdleTime.
	db.SetMaxIdleConns(mysqlPoolIdle)
	db.SetConnMaxIdleTime(mysqlPoolIdleTime)
	b, err := NewMySQL(db, opts...)
	if err != nil {
		db.Close()
		return nil, err
	}
	b.closers = append(b.closers, func() { db.Close() })
	return b, nil
}

// SQLiteDSN translates a sqlite:// DSN into the data source name modernc.org/sqlite opens (see
// Open), for a pool of your own: with the session setup and, unless the DSN sets a
// journal_mode, _pragma=journal_mode(wal), which every connection runs as it opens (Open's
// backend sets WAL mode at its first write instead).
func SQLiteDSN(dsn string) (string, error) {
	name, wal, err := sqliteDSN(dsn)
	if err != nil || !wal {
		return name, err
	}
	return name + "&_pragma=" + url.QueryEscape("journal_mode(wal)"), nil
}

// sqliteDSN is SQLiteDSN without journal_mode(wal): wal reports that the DSN sets no
// journal_mode, so that the backend Open makes puts the file in WAL mode itself, at its first
// operation that may write (walSwitch), not at every connection's open as the pragma in the
// DSN would: an Inspect (simba status) then leaves the file's journal mode as it found it.
func sqliteDSN(dsn string) (name string, wal bool, err error) {
	bad := func(format string, args ...any) (string, bool, error) {
		return "", false, dsnutil.Errorf(spi.ErrInvalidOption, "sql sqlite DSN", dsn, format, args...)
	}
	rest, ok := strings.CutPrefix(dsn, "sqlite://")
	if !ok {
		if rest, ok = strings.CutPrefix(dsn, "sqlite3://"); !ok {
			return bad("want sqlite://path")
		}
	}
	path, query, _ := strings.Cut(rest, "?")
	if path == "" {
		return bad("no file path (sqlite:///absolute/path.db or sqlite://relative/path.db)")
	}
	vals, err := url.ParseQuery(query)
	if err != nil {
		return bad("bad parameters: %v", err)
	}
	if err := checkSQLiteParams(vals); err != nil {
		return bad("%v", err)
	}
	if path == ":memory:" || strings.HasPrefix(path, "file::memory:") || vals.Get("mode") == "memory" {
		return bad("an in-memory database lives in one connection of one process and cannot coordinate anything; use a file")
	}
	for _, p := range vals["_pragma"] {
		if err := checkPragma(p); err != nil {
			return bad("%v", err)
		}
	}
	have := func(pragma string) bool {
		for _, p := range vals["_pragma"] {
			if strings.HasPrefix(strings.ToLower(strings.TrimSpace(p)), pragma) {
				return true
			}
		}
		return false
	}
	for _, p := range []struct{ name, value string }{
		{"busy_timeout", "busy_timeout(10000)"},
		{"foreign_keys", "foreign_keys(1)"},
	} {
		if !have(p.name) {
			vals.Add("_pragma", p.value)
		}
	}
	return "file:" + path + "?" + vals.Encode(), !have("journal_mode"), nil
}

// sqliteParams are the DSN parameters a SQLite DSN may carry: SQLite's own URI parameters and
// modernc.org/sqlite's, but for its mattn-style pragma shorthands (sqliteShorthands). SQLite
// ignores a URI parameter it does not know, so a typo (jurnal_mode=wal, _pragam=...) would
// otherwise open the file without the setting, silently.
var sqliteParams = map[string]bool{
	"vfs": true, "mode": true, "cache": true, "psow": true, "nolock": true, "immutable": true, "modeof": true,
	"_pragma": true, "_time_format": true, "_time_integer_format": true, "_timezone": true, "_txlock": true,
	"_inttotime": true, "_texttotime": true, "_dqs": true, "_defensive": true, "_error_rc": true,
}

// sqliteShorthands are modernc.org/sqlite's mattn-style shorthands for pragmas, refused with the
// _pragma form to use instead: Simba's session setup (busy_timeout, foreign_keys) and its WAL
// switch look for the pragma in _pragma only, so a shorthand would run beside or under them.
var sqliteShorthands = map[string]string{
	"_busy_timeout": "busy_timeout", "_timeout": "busy_timeout", "_auto_vacuum": "auto_vacuum",
	"_vacuum": "auto_vacuum", "_foreign_keys": "foreign_keys", "_fk": "foreign_keys",
	"_journal_mode": "journal_mode", "_journal": "journal_mode", "_synchronous": "synchronous",
	"_sync": "synchronous", "_query_only": "query_only",
}

// checkSQLiteParams refuses a parameter of a SQLite DSN that neither SQLite nor the driver
// knows, naming the known ones, and a pragma shorthand, naming its _pragma form.
func checkSQLiteParams(vals url.Values) error {
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if pragma, ok := sqliteShorthands[k]; ok {
			return fmt.Errorf("parameter %q: write it as _pragma=%s(%s)", k, pragma, vals.Get(k))
		}
		if !sqliteParams[k] {
			return fmt.Errorf("unknown parameter %q (SQLite would ignore it; known: _pragma=name(value), "+
				"mode, cache, vfs, immutable, nolock, psow, modeof, _txlock, _time_format, _time_integer_format, "+
				"_timezone, _inttotime, _texttotime, _dqs, _defensive, _error_rc)", k)
		}
	}
	return nil
}

func openSQLite(dsn string, opts []Option) (*Backend, error) {
	name, wal, err := sqliteDSN(dsn)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", name)
	if err != nil {
		return nil, dsnutil.Errorf(spi.ErrInvalidOption, "sql sqlite DSN", dsn, "%v", err)
	}
	// The DSN carries the session setup: no per-connection setup needed.
	file, _, _ := strings.Cut(strings.TrimPrefix(name, "file:"), "?")
	var ws *walSwitch
	if wal {
		ws = &walSwitch{file: file}
	}
	q, _ := url.ParseQuery(strings.SplitN(name, "?", 2)[1])
	b, err := newSQLite(db, nil, file, q.Get("mode") == "ro", ws, opts)
	if err != nil {
		db.Close()
		return nil, err
	}
	b.closers = append(b.closers, func() { db.Close() })
	return b, nil
}

// sqlitePragmas are the pragmas a DSN may set: SQLite's pragmas that change a setting of the
// connection or the database file (https://sqlite.org/pragma.html), without the deprecated ones
// and those that only report (integrity_check, table_info, ...) or corrupt (writable_schema,
// schema_version). TestSQLitePragmasAreKnown checks each against the linked SQLite's
// pragma_list.
var sqlitePragmas = map[string]bool{
	"analysis_limit": true, "application_id": true, "auto_vacuum": true, "automatic_index": true,
	"busy_timeout": true, "cache_size": true, "cache_spill": true, "case_sensitive_like": true,
	"cell_size_check": true, "checkpoint_fullfsync": true, "defer_foreign_keys": true,
	"encoding": true, "foreign_keys": true, "fullfsync": true, "hard_heap_limit": true,
	"ignore_check_constraints": true, "journal_mode": true, "journal_size_limit": true,
	"legacy_alter_table": true, "locking_mode": true, "max_page_count": true, "mmap_size": true,
	"page_size": true, "query_only": true, "read_uncommitted": true, "recursive_triggers": true,
	"reverse_unordered_selects": true, "secure_delete": true, "soft_heap_limit": true,
	"synchronous": true, "temp_store": true, "threads": true, "trusted_schema": true,
	"user_version": true, "wal_autocheckpoint": true,
}

// checkPragma checks a _pragma value of a sqlite:// DSN: name(value) or name=value, name one of
// sqlitePragmas. modernc.org/sqlite runs "PRAGMA <value>" verbatim at every connection's open,
// and SQLite ignores a pragma it does not know without a word, and takes a bare name as a
// query that sets nothing: a misspelt _pragma=foreign_key(1), or a key('...') this build of
// SQLite has no encryption for, would otherwise leave the user believing it took effect. The
// message names the pragma, never its value (which may be a key).
func checkPragma(p string) error {
	t := strings.TrimSpace(p)
	name, value, form := t, "", ""
	if i := strings.IndexAny(t, "(="); i >= 0 {
		name, value, form = strings.TrimSpace(t[:i]), strings.TrimSpace(t[i+1:]), t[i:i+1]
	}
	if form == "(" {
		var ok bool
		if value, ok = strings.CutSuffix(value, ")"); !ok {
			form = ""
		}
		value = strings.TrimSpace(value)
	}
	if name == "" || strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_')
	}) >= 0 {
		return fmt.Errorf("_pragma: want name(value), e.g. _pragma=busy_timeout(10000)")
	}
	if !sqlitePragmas[strings.ToLower(name)] {
		return fmt.Errorf("_pragma: unknown pragma %q (SQLite would ignore it without a word; see https://sqlite.org/pragma.html)", name)
	}
	if form == "" || value == "" || strings.ContainsAny(value, "();") {
		return fmt.Errorf("_pragma %s: want %s(value), e.g. _pragma=busy_timeout(10000) (a bare name only reads the setting)", name, name)
	}
	return nil
}
