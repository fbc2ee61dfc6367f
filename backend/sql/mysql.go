package sql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/generated/sqlq"
	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// NewMySQL returns a MySQL 8 / MariaDB 10.11 backend on the user's go-sql-driver/mysql pool.
// The database needs InnoDB (the migration creates its tables with it); no session setup is
// needed (the now-expression does not depend on the time zone) beyond MariaDB's
// idle_transaction_timeout, which the backend sets itself (see the package doc), and no logic depends on
// affected-row counts, so clientFoundRows does not matter. interpolateParams=true in the DSN
// saves a prepare round trip per statement (Open sets it). NewMySQL does no I/O; the schema is
// checked (or migrated, WithAutoMigrate) before the first operation. Close does not close db.
//
// When db has SetMaxOpenConns(n) with n ≥ 2 (read once, here: set it before), the backend's
// calls other than keep-alives, and the waker's connections below, use at most n-1 of them
// between them, so that a keep-alive always finds one, however many calls (up to 32 in flight
// per client, of every client on the backend) wait at the server; the application's own
// queries on db, and other backends made on it, are not counted, and a pool of one keeps
// nothing (see the package doc, Keep-alives and the pool).
//
// Make db on MySQLConnector (sql.OpenDB) to get what Open's pool has against a silent link
// (see the package doc, Outages) and against a process stopped inside a transaction (MariaDB's
// idle_transaction_timeout, see the package doc; a pool made otherwise, which the application
// may share, is left without it: set idle_transaction_timeout in its DSN to get it); on such a pool the waker's connections come from a pool of
// their own on the same configuration, as Open's do, which keeps up to 11 of them idle (what
// the waker holds at most) for a minute, and which Close closes. On any other pool
// the waker pins connections of db: one that marks the leases held and one per name waited for
// at once, at most nine, and at most a quarter of db's SetMaxOpenConns when it is set; while
// more names are waited for than that leaves blocking places for (at least one), one more
// connection watches the rest. Those connections take the calls' slots while they hold them.
func NewMySQL(db *sql.DB, opts ...Option) (*Backend, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: sql mysql: nil *sql.DB", spi.ErrInvalidOption)
	}
	d := mysqlStd(db)
	// Read once, here, like PostgreSQL's MaxConns: a SetMaxOpenConns made after NewMySQL is
	// not seen (Open's pool is unbounded: 0, no slots).
	d.spare = newKeepAliveConn(db.Stats().MaxOpenConnections)
	mc := connectorOf(db.Driver())
	if mc != nil {
		d.conns = mc.conns
		d.server, d.user = mc.server, mc.user
	} else {
		// A pool made otherwise may be the application's too: its transactions are not bounded
		// by Simba's TTLs, so its connections are left as they are.
		d.idleTx = ""
	}
	b, err := newBackend(wire.SQLMySQL, d, opts)
	if err != nil {
		return nil, err
	}
	d.b = b
	if mc != nil && mc.driverLog != nil && b.cfg.logger != nil {
		mc.driverLog.to.Store(b.cfg.logger)
	}
	wd, _ := wire.SQLDialectByName(wire.SQLMySQL)
	mw := newMySQLWaker(db, wd)
	mw.log = b.log
	if mc == nil {
		// The waker's connections come from db: each takes one of the calls' slots, so that
		// the calls and the waker together leave one connection to the keep-alives.
		mw.slots = d.spare.slots
	}
	b.waker, b.notes = mw, mw
	if mc != nil {
		// The waker's named-lock waits block a connection without a byte for as long as they
		// wait: a pool of their own keeps them apart from the calls' silent connections.
		wakeDB := sql.OpenDB(mc.plain)
		// database/sql keeps 2 idle connections by default, and the waker holds up to
		// mysqlWakePoolIdle at once: each wait that ended past the second closed its
		// connection, and the next wait dialled one again (one of 3 backends' waker pools
		// closed 66 so in 8 s of bench/cmd/rtts -churn on MariaDB). Idle ones go after
		// mysqlPoolIdleTime, so a burst of waits leaves no connections for long.
		wakeDB.SetMaxIdleConns(mysqlWakePoolIdle)
		wakeDB.SetConnMaxIdleTime(mysqlPoolIdleTime)
		b.waker.(*mysqlWaker).ownPool(wakeDB)
		b.closers = append(b.closers, func() { wakeDB.Close() })
	}
	return b, nil
}

// mysqlWakePoolIdle is what the waker holds at most on its own pool: the marker's
// connection, one per blocking wait, the watch's and reap's.
const mysqlWakePoolIdle = 1 + mysqlMaxWaits + 2

// mysqlPoolIdle is how many idle connections Open's MySQL/MariaDB pool keeps: as many as a
// client keeps calls in flight.
const mysqlPoolIdle = 32

// mysqlPoolIdleTime is how long the pools Simba makes for MySQL/MariaDB (Open's, and the
// waker's own) keep a connection idle: enough to carry it from one burst of calls or waits to
// the next under steady use, short enough that a burst's extra connections are not kept at the
// server for long.
const mysqlPoolIdleTime = time.Minute

func mysqlStd(db *sql.DB) *stdDialect {
	wd, _ := wire.SQLDialectByName(wire.SQLMySQL)
	return &stdDialect{
		db:     db,
		q:      func(c dbtx) sqlq.Queries { return sqlq.MySQL(c) },
		begin:  wd.Begin,
		setup:  wd.SessionSetup, // empty for MySQL
		idleTx: wd.IdleTxTimeout,
		idleTxUnknown: func(err error) bool {
			var me *mysqldriver.MySQLError
			return errors.As(err, &me) && me.Number == 1193 // ER_UNKNOWN_SYSTEM_VARIABLE
		},
		classifyErr: classifyMySQL,
		rolledBack:  mysqlDeadlock,
		lockMigrate: func(ctx context.Context, c *sql.Conn) (func(), error) {
			var got sql.NullInt64
			if err := c.QueryRowContext(ctx, wd.MigrateLock).Scan(&got); err != nil {
				return nil, err
			}
			if got.Int64 != 1 {
				return nil, fmt.Errorf("another client held the migration lock (GET_LOCK name %s) for %d s", wire.SQLMigrateLockName, wire.SQLMigrateLockTimeoutS)
			}
			return func() {
				uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if _, err := c.ExecContext(uctx, wd.MigrateUnlock); err != nil {
					_ = c.Raw(func(any) error { return driver.ErrBadConn }) // the lock goes with the connection
				}
			}, nil
		},
	}
}

// mysqlDeadlock reports ER_LOCK_DEADLOCK (1213): InnoDB rolled the whole transaction back.
// (A lock wait timeout, 1205, rolls back only the statement, and only after
// innodb_lock_wait_timeout: it goes up as retryable instead.)
func mysqlDeadlock(err error) bool {
	var me *mysqldriver.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

// classifyMySQL: deadlocks (1213) and lock wait timeouts (1205) are retryable and contention
// (spi.Contended: the server answered); a write refused by a read-only server (1290 --read-only,
// 1836 read-only mode, 1792 a read-only transaction: a replica, a primary demoted in a
// failover) is retryable, naming read-only (errReadOnly); too many connections, server
// shutdown, interrupted or killed connections and network errors are retryable; a missing table or column,
// and a missing database (1049: the hint says to create it before migrating), is ErrSchemaMissing; access denied,
// syntax and data errors (out-of-range values, 1264 and 1690, included), a session
// variable the server refuses (1193 unknown, 1231 a bad value, 1232 a bad type, 1238 read-only:
// go-sql-driver/mysql SETs every DSN parameter it does not know on each new connection, so a
// misspelt one fails every connection alike; it matches spi.ErrInvalidOption, naming the DSN
// parameter as the cause) and TLS failures (tls=true to a server without TLS or whose
// certificate does not verify) are permanent.
//
// Refused credentials or privileges match spi.ErrAccessDenied (mysqlAccessDenied).
func classifyMySQL(b *Backend, op string, err error) error {
	if spi.IsTLSError(err) || errors.Is(err, mysqldriver.ErrNoTLS) {
		return spi.TLSFailure(op, err)
	}
	if denied := mysqlAccessDenied(b, op, err); denied != nil {
		return denied
	}
	var me *mysqldriver.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1146, 1054: // ER_NO_SUCH_TABLE, ER_BAD_FIELD_ERROR
			return b.schemaMissing(fmt.Sprintf("%s: %s", op, me.Message), err)
		case 1049: // ER_BAD_DB_ERROR: the DSN's database does not exist
			return b.noDatabase(op, me.Message, err)
		case 1213, 1205:
			// The server answered: the transaction lost to concurrent ones (a deadlock victim
			// still so after retryRolledBack's attempts, a row lock not granted within
			// innodb_lock_wait_timeout). Contention, not an outage.
			return spi.Contended(op, err)
		case 1290, 1836, 1792:
			// 1290 ER_OPTION_PREVENTS_STATEMENT names the option: read-only is the one a
			// write of ours can meet (--read-only, super_read_only).
			if me.Number != 1290 || strings.Contains(strings.ToLower(me.Message), "read") {
				return spi.Unavailable(op, errReadOnly(mysqlReadOnlyHint, err))
			}
			return spi.Unavailable(op, err)
		case 1040, 1053, 1077, 1080, 1152, 1153, 1154, 1155, 1156, 1157, 1158, 1159,
			1160, 1161, 1184, 1203, 1226, 1317, 1927, 2002, 2003, 2006, 2013,
			3024, 4031:
			return spi.Unavailable(op, err)
		case 1193, 1231, 1232, 1238:
			// A session variable the server refuses: Simba sets none but MariaDB's
			// idle_transaction_timeout (whole seconds from 1 s to 8 h, within its range; its
			// 1193 on MySQL 8 never gets here, idleTxUnknown), so it is one of the DSN's
			// parameters, which go-sql-driver/mysql SETs when it does not know them: the DSN
			// cannot work, as any other invalid one.
			return fmt.Errorf("%w: %s: %w (go-sql-driver/mysql sets a DSN parameter it does not know as a session variable on every connection: fix or remove that DSN parameter)",
				spi.ErrInvalidOption, op, err)
		case 1064, 1264, 1366, 1406, 1690:
			// (Refused credentials and privileges went to mysqlAccessDenied above.)
			// 1690 ER_DATA_OUT_OF_RANGE (a BIGINT overflow): retrying computes the same value.
			return spi.AsPermanent(fmt.Errorf("%s: %w", op, err))
		}
		return spi.Unavailable(op, err)
	}
	var ne net.Error
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysqldriver.ErrInvalidConn) || errors.As(err, &ne) {
		return spi.Unavailable(op, err)
	}
	return spi.Unavailable(op, err)
}

// MySQL/MariaDB errors by which the server refused the client's credentials (authentication)
// or privileges (authorization).
var (
	mysqlAuthErrors = map[uint16]bool{
		1045: true, // ER_ACCESS_DENIED_ERROR: a wrong password, an unknown user
		1251: true, // ER_NOT_SUPPORTED_AUTH_MODE: an authentication method the client lacks
		1275: true, // ER_SERVER_IS_IN_SECURE_AUTH_MODE: an old password hash refused
		1698: true, // ER_ACCESS_DENIED_NO_PASSWORD_ERROR: a password needed, none given
		1820: true, // ER_MUST_CHANGE_PASSWORD: the password expired
		1862: true, // ER_MUST_CHANGE_PASSWORD_LOGIN: the password expired
		3118: true, // ER_ACCOUNT_HAS_BEEN_LOCKED (MySQL)
		4151: true, // ER_ACCOUNT_HAS_BEEN_LOCKED (MariaDB)
	}
	mysqlPrivilegeErrors = map[uint16]bool{
		1044: true, // ER_DBACCESS_DENIED_ERROR: no privilege on the database
		1142: true, // ER_TABLEACCESS_DENIED_ERROR: a SELECT, INSERT, ... denied on a table
		1143: true, // ER_COLUMNACCESS_DENIED_ERROR
		1227: true, // ER_SPECIFIC_ACCESS_DENIED_ERROR: a privilege such as SUPER needed
		1370: true, // ER_PROCACCESS_DENIED_ERROR
	}
)

// mysqlAuthCause says what an authentication refusal (mysqlAuthErrors) means and what fixes
// it: an account locked or a password expired is not fixed in the DSN.
func mysqlAuthCause(number uint16) string {
	switch number {
	case 3118, 4151:
		return "the account is locked: unlock it (ALTER USER ... ACCOUNT UNLOCK)"
	case 1820, 1862:
		return "the account's password has expired (the server accepts nothing but a new password from it): " +
			"set a new one (ALTER USER ... IDENTIFIED BY) and put it in the DSN, or lift the expiry (ALTER USER ... PASSWORD EXPIRE NEVER)"
	case 1251:
		return "the account's authentication method is one the driver does not speak or the DSN does not allow: " +
			"give the account another (ALTER USER), or allow it in the DSN (allowNativePasswords, allowCleartextPasswords)"
	case 1275:
		return "the account's password has an old hash the server refuses (secure_auth): set the password again (ALTER USER ... IDENTIFIED BY)"
	case 1698:
		return "the account needs a password and the DSN gives none: put the user's password in the DSN"
	}
	return "the server refused the DSN's credentials (an incorrect password, an unknown user or host): fix the user and password in the DSN (or the account: CREATE USER, ALTER USER ... IDENTIFIED BY)"
}

// mysqlAccessDenied is classifyMySQL's answer for a refusal of the client's credentials (a
// wrong password, an unknown user, an authentication method the driver cannot speak: the
// driver's ErrNativePassword, ErrCleartextPassword, ErrOldPassword, ErrUnknownPlugin) or of a
// privilege (a missing GRANT): a permanent error matching spi.ErrAccessDenied that says which,
// for which user at which server when the pool was made on MySQLConnector (the server's
// message names the user in any case), and what to do. It returns nil for any other error.
func mysqlAccessDenied(b *Backend, op string, err error) error {
	who := b.who()
	var me *mysqldriver.MySQLError
	switch {
	case errors.As(err, &me) && mysqlAuthErrors[me.Number]:
		return spi.AccessDenied(op, "authentication refused"+who+": "+mysqlAuthCause(me.Number), err)
	case errors.Is(err, mysqldriver.ErrNativePassword), errors.Is(err, mysqldriver.ErrCleartextPassword),
		errors.Is(err, mysqldriver.ErrOldPassword), errors.Is(err, mysqldriver.ErrUnknownPlugin):
		return spi.AccessDenied(op, "authentication refused"+who+": "+mysqlAuthCause(1251), err)
	case errors.As(err, &me) && mysqlPrivilegeErrors[me.Number]:
		return spi.AccessDenied(op, "privilege refused"+who+": the user lacks a privilege Simba needs: GRANT SELECT, INSERT, UPDATE, DELETE ON the database's simba_* tables TO the user (and CREATE, ALTER, INDEX, DROP for migrations)", err)
	}
	return nil
}
