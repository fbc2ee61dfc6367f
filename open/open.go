// Package open opens a Simba backend from a DSN, so that a program (or a configuration file, or
// a command line) can name the backend as a string instead of picking a backend package and its
// constructor by hand:
//
//	postgres://user:password@host:5432/db      PostgreSQL (also postgresql://)
//	mysql://user:password@host:3306/db         MySQL 8, MariaDB
//	sqlite:///var/lib/app/simba.db             SQLite file (sqlite://relative/path.db; sqlite3:// too)
//	redis://[user:password@]host:6379[/db]     Redis (rediss:// over TLS)
//	redis+cluster://host:7001,host:7002        Redis Cluster (rediss+cluster://)
//	redis+sentinel://host:26379,host/master    Redis through Sentinel (rediss+sentinel://)
//	zk://[user:password@]host:2181[/chroot][?tickTime=2s]  ZooKeeper (zk+tls:// over TLS)
//	etcd://[user:password@]host:2379[,host…][/prefix]  etcd (etcd+tls:// over TLS)
//
// The SQL schemes open backend/sql, the redis ones backend/redis, the zk ones
// backend/zookeeper, the etcd ones backend/etcd.
// Each DSN's parameters are its backend's (see Open in backend/sql, ParseDSN in backend/redis,
// backend/zookeeper and backend/etcd); the scheme is case-insensitive. Among the Redis ones,
// strict_durability=true makes the first session fail with a permanent error (matching
// redis.ErrNotDurable) at a server that could lose lease hashes (no AOF, or an allkeys-*
// eviction policy), where the backend otherwise only logs a warning; wait_replicas=N and
// wait_timeout=D wait for N replicas to acknowledge each grant (redis.WithWaitReplicas).
//
// Errors: a DSN that cannot work (no or an unknown scheme, a malformed DSN, a bad parameter)
// fails Open with a one-line error matching simba.ErrInvalidOption (spi.ErrInvalidOption) that
// names what is wrong; a mysql:// parameter go-sql-driver/mysql does not know is the exception,
// since the driver sends it to the server as a session variable: it passes Open and fails the
// first call (and WithPing) with a permanent error matching simba.ErrInvalidOption that quotes
// the server's refusal. Open does no I/O by default, like the backends' own constructors: a
// backend that is down or refuses the credentials shows in the first call, which the client
// retries or reports. WithPing makes Open find out at once: it then fails with a one-line error
// matching simba.ErrUnavailable when the servers cannot be reached (retryable), or a permanent
// one (spi.Classify) naming the refusal when they reject the credentials or privileges
// (simba.ErrAccessDenied) or the schema is missing (simba.ErrSchemaMissing). No error shows a password: the DSN is quoted redacted
// (postgres://user:xxxxx@host/db), and every credential of the DSN is masked wherever a
// driver's message repeats it.
//
// The package is named open, at github.com/simba-go/simba/open, so that a call reads as what
// it does, open.Open(ctx, dsn), with options open.WithLogger and the like, and the name dsn
// stays free for the variables that hold one. It imports every backend (and with it every
// driver); the package simba imports none, so a program that builds its backend by hand links
// only the drivers it uses.
package open

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	etcdbackend "github.com/simba-go/simba/backend/etcd"
	redisbackend "github.com/simba-go/simba/backend/redis"
	sqlbackend "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/backend/zookeeper"
	"github.com/simba-go/simba/spi"

	dsnutil "github.com/simba-go/simba/internal/dsn"
)

// PingTimeout bounds WithPing's check when the context given to Open has no earlier deadline.
const PingTimeout = 10 * time.Second

// pingOwner is the owner of the session WithPing opens and closes.
const pingOwner = "simba open ping"

// pingTTL is the TTL of that session: if closing it fails, it expires soon after.
const pingTTL = 5 * time.Second

// Option configures Open.
type Option struct{ apply func(*config) error }

type config struct {
	logger      *slog.Logger
	autoMigrate bool
	tls         *tls.Config
	ping        bool
}

// WithLogger sets the logger every backend logs its warnings to (foreign records it skips, a
// Redis server without durable persistence, a ZooKeeper DSN without credentials, an etcd
// server that raises a session's TTL to its minimum, ...). Without it a backend logs to the
// logger of the client it is given to, if that has one (simba.WithLogger: the client hands it
// over, spi.LoggerAdopter), and else to slog.Default(); with it, the backend keeps l whatever
// the client's logger. A nil logger is an error matching spi.ErrInvalidOption. go-sql-driver/mysql's
// own lines (bad idle connections) go to this logger at DEBUG, unless the program set a logger
// with mysql.SetLogger before Open: that one is kept, and the process-wide logger is never
// changed. go-redis's (failed dials, pool events) go to its process-wide logger, which only
// redis.SetLogger sets; the Redis backend leaves it to the program (see the backends'
// WithLogger).
func WithLogger(l *slog.Logger) Option {
	return Option{func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: open: WithLogger(nil)", spi.ErrInvalidOption)
		}
		c.logger = l
		return nil
	}}
}

// WithAutoMigrate makes a SQL backend apply its embedded migrations before Open returns (see
// WithAutoMigrate in backend/sql); Open then does I/O and fails as WithPing does. It needs the
// privileges to create tables. Backends without a schema (Redis, ZooKeeper, etcd) ignore it, so
// a program can pass it whatever DSN it is given.
func WithAutoMigrate() Option {
	return Option{func(c *config) error {
		c.autoMigrate = true
		return nil
	}}
}

// WithTLS makes every connection to Redis (any redis scheme: redis.Config.UseTLS), ZooKeeper
// (zookeeper.WithTLS) or etcd (etcd.Config.TLS) use TLS configured by cfg, replacing what the
// DSN says (rediss://, zk+tls://, etcd+tls://). SQL drivers take their TLS settings from the DSN (PostgreSQL sslmode,
// sslrootcert, sslcert and sslkey; MySQL tls=true or tls=skip-verify), so WithTLS with a SQL DSN
// is an error matching spi.ErrInvalidOption rather than a setting silently not applied. A nil
// cfg changes nothing.
func WithTLS(cfg *tls.Config) Option {
	return Option{func(c *config) error {
		c.tls = cfg
		return nil
	}}
}

// WithPing makes Open check the backend before returning it: it opens a session through the
// SPI and closes it, which proves what a client needs (the servers answer, accept the
// credentials, allow the writes and, for SQL, have the schema). The check is bounded by ctx and
// by PingTimeout. Without it, Open does no I/O.
func WithPing() Option {
	return Option{func(c *config) error {
		c.ping = true
		return nil
	}}
}

// Open returns the backend dsn names (see the package doc for the schemes). The caller closes
// it (spi.Backend.Close); simba.New does not. ctx bounds the I/O that WithAutoMigrate and
// WithPing do; Open does none without them.
func Open(ctx context.Context, dsn string, opts ...Option) (spi.Backend, error) {
	var cfg config
	for _, o := range opts {
		if o.apply == nil {
			continue
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	scheme, _, ok := strings.Cut(dsn, "://")
	if !ok || !dsnutil.ValidScheme(scheme) {
		return nil, dsnutil.Errorf(spi.ErrInvalidOption, "DSN", dsn, "no scheme (want %s)", schemeList)
	}
	if lower := strings.ToLower(scheme); lower != scheme {
		dsn = lower + dsn[len(scheme):]
		scheme = lower
	}
	b, err := openScheme(ctx, scheme, dsn, cfg)
	if err != nil {
		return nil, err
	}
	if cfg.ping {
		if err := ping(ctx, b); err != nil {
			b.Close()
			return nil, checkError(err, dsn)
		}
	}
	return b, nil
}

// schemeList names the schemes Open knows, for its errors.
const schemeList = "postgres://, postgresql://, mysql://, sqlite://, redis://, rediss://, " +
	"redis+cluster://, rediss+cluster://, redis+sentinel://, rediss+sentinel://, zk://, zk+tls://, etcd:// or etcd+tls://"

// openScheme dispatches to the backend of scheme (lower case).
func openScheme(ctx context.Context, scheme, dsn string, cfg config) (spi.Backend, error) {
	switch scheme {
	case "postgres", "postgresql", "mysql", "sqlite", "sqlite3":
		if cfg.tls != nil {
			return nil, dsnutil.Errorf(spi.ErrInvalidOption, "DSN", dsn,
				"WithTLS does not apply to SQL backends: set TLS in the DSN (PostgreSQL sslmode=verify-full&sslrootcert=...; MySQL tls=true)")
		}
		var o []sqlbackend.Option
		if cfg.logger != nil {
			o = append(o, sqlbackend.WithLogger(cfg.logger))
		}
		if cfg.autoMigrate {
			o = append(o, sqlbackend.WithAutoMigrate())
		}
		b, err := sqlbackend.Open(ctx, dsn, o...)
		if err != nil {
			if cfg.autoMigrate {
				return nil, checkError(err, dsn)
			}
			return nil, err
		}
		return b, nil
	case "redis", "rediss", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel":
		rc, err := redisbackend.ParseDSN(dsn)
		if err != nil {
			return nil, err
		}
		rc.UseTLS(cfg.tls)
		var o []redisbackend.Option
		if cfg.logger != nil {
			o = append(o, redisbackend.WithLogger(cfg.logger))
		}
		b, err := redisbackend.OpenConfig(rc, o...)
		if err != nil {
			return nil, err
		}
		return b, nil
	case "zk", "zk+tls":
		var o []zookeeper.Option
		if cfg.logger != nil {
			o = append(o, zookeeper.WithSlog(cfg.logger))
		}
		if cfg.tls != nil {
			o = append(o, zookeeper.WithTLS(cfg.tls))
		}
		b, err := zookeeper.New(dsn, o...)
		if err != nil {
			return nil, err
		}
		return b, nil
	case "etcd", "etcd+tls":
		ec, err := etcdbackend.ParseDSN(dsn)
		if err != nil {
			return nil, err
		}
		if cfg.tls != nil {
			ec.TLS = cfg.tls
		}
		var o []etcdbackend.Option
		if cfg.logger != nil {
			o = append(o, etcdbackend.WithSlog(cfg.logger))
		}
		b, err := etcdbackend.NewFromConfig(ec, o...)
		if err != nil {
			return nil, checkError(err, dsn)
		}
		return b, nil
	}
	return nil, dsnutil.Errorf(spi.ErrInvalidOption, "DSN", dsn, "unknown scheme %q (want %s)", scheme, schemeList)
}

// ping opens and closes a session on b.
func ping(ctx context.Context, b spi.Backend) error {
	ctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	s, err := b.OpenSession(ctx, pingOwner, pingTTL)
	if err != nil {
		return err
	}
	return b.CloseSession(ctx, s.ID)
}

// checkError makes the error of a failed check (or migration) of the backend dsn names one line
// that names the DSN, redacted, and shows no credential. It keeps err in the chain (errors.Is
// and errors.As see the backend's classification) unless err's message shows part of a
// credential that cannot be masked; it then keeps only err's class.
func checkError(err error, dsn string) error {
	msg := oneLine(err.Error())
	cause := err
	if s, ok := dsnutil.Scrub(msg, dsn); ok {
		msg = s
	} else {
		msg = "the backend's message is withheld: it quotes part of the credentials"
		cause = classOnly(err)
	}
	redacted := dsnutil.Redact(dsn)
	if !strings.Contains(msg, redacted) {
		msg += fmt.Sprintf(" (DSN %q)", redacted)
	}
	return &checkErr{msg: msg, err: cause}
}

// checkErr is a failed check: its own (one-line, scrubbed) message over the backend's error.
type checkErr struct {
	msg string
	err error
}

func (e *checkErr) Error() string { return e.msg }
func (e *checkErr) Unwrap() error { return e.err }

// classOnly returns an error that matches the sentinels and the class (spi.Classify) of err
// and carries nothing of its message.
func classOnly(err error) error {
	var is []error
	for _, s := range []error{spi.ErrUnavailable, spi.ErrInvalidOption, spi.ErrSchemaMissing,
		spi.ErrSchemaDrift, spi.ErrTLS, spi.ErrAccessDenied, spi.ErrClosed, context.DeadlineExceeded, context.Canceled} {
		if errors.Is(err, s) {
			is = append(is, s)
		}
	}
	out := errors.Join(is...)
	if out == nil {
		out = errors.New("backend error")
	}
	if spi.Classify(err) == spi.Permanent {
		return spi.AsPermanent(out)
	}
	return out
}

// oneLine joins the lines of a multi-line message (pgx lists every address it tried on a line of
// its own): a line ending in ':' is followed by a space, the others by "; "; repeated lines are
// dropped.
func oneLine(msg string) string {
	if !strings.ContainsAny(msg, "\r\n") {
		return msg
	}
	var b strings.Builder
	seen := map[string]bool{}
	for _, l := range strings.FieldsFunc(msg, func(r rune) bool { return r == '\n' || r == '\r' }) {
		l = strings.TrimSpace(l)
		if l == "" || seen[l] {
			continue
		}
		seen[l] = true
		if b.Len() > 0 {
			if strings.HasSuffix(b.String(), ":") {
				b.WriteString(" ")
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(l)
	}
	return b.String()
}
