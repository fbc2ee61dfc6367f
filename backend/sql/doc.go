// Package sql is Simba's SQL backend: the Backend SPI (with spi.Inspector, and spi.Hinter on
// PostgreSQL) on PostgreSQL (pgx/v5), MySQL 8 / MariaDB 10.11 (go-sql-driver/mysql) and SQLite
// (modernc.org/sqlite, no cgo), driving the statements generated from spec/sql.yaml
// (generated/sqlc/<dialect>, in the order and transactions generated/wire prescribes).
//
// Import it under another name, as it shadows database/sql:
//
//	import simbasql "github.com/simba-go/simba/backend/sql"
//
//	b, err := simbasql.Open(ctx, "postgres://simba@db.internal/app", simbasql.WithAutoMigrate())
//	client, err := simba.New(b)
//
// # Construction
//
// Open takes a DSN (postgres://, postgresql://, mysql://, sqlite://path) and owns the pool it
// opens; NewPostgres, NewMySQL and NewSQLite take the user's own pool and leave it open on Close.
//
// Open does no I/O unless WithAutoMigrate is given. For SQLite, Open refuses in-memory
// databases (they cannot coordinate anything) and adds busy_timeout, foreign_keys and WAL
// journal pragmas unless the DSN sets them; NewSQLite runs the session setup on every connection
// of the user's pool itself. For MySQL/MariaDB, Open sets interpolateParams=true (one round trip
// per statement). For PostgreSQL, a user's pool should run PostgresAfterConnect (READ COMMITTED).
//
// # Schema
//
// The tables are those of sql/schema/<dialect>/0001_init.sql, embedded in package
// github.com/simba-go/simba/sql/schema. Apply the file with your migration tool, or call
// Migrate (idempotent, safe to run from several clients at once), or pass WithAutoMigrate. A
// backend checks the schema version once, before its first operation: a missing or old schema is
// an error matching spi.ErrSchemaMissing (simba.ErrSchemaMissing) that names the migration to
// apply.
//
// # Time
//
// Every expiry is decided by the database clock, as UTC epoch milliseconds: PostgreSQL's
// clock_timestamp(), MySQL/MariaDB's statement time (an expression independent of time zones
// and DST), SQLite's host clock (so a SQLite file coordinates processes of one host only). The
// client's clock is never consulted: every remaining time the backend reports comes from the
// database.
//
// # Cost per operation
//
// Every operation is a bounded number of statements, whatever the number of leases a session
// holds: keep-alive is three statements pipelined in one round trip on PostgreSQL, four on
// MySQL/MariaDB and three on SQLite (one fewer without groups); acquire, release, join, leave and
// close are one statement each on PostgreSQL (an acquire that lost a race re-runs its statement,
// at most three times in all), and acquire and close are one transaction of four and three
// statements on MySQL/MariaDB and SQLite.
//
// # Hints
//
// On PostgreSQL every release (and the releases of a closed session) NOTIFYs the lease name on
// channel simba_released, and every join or leave the group name on simba_group; Hints LISTENs
// on a dedicated connection that reconnects with backoff. MySQL/MariaDB and SQLite have no push:
// a candidate retries at the holder's remaining time.
//
// # Inspection
//
// Inspect (spi.Inspector) lists every lease with its holder, owner, token and the holder's time
// left (a lease whose holder expired is shown free: anyone may take it over), every live session
// and every group's live members. SchemaVersion and DatabaseNow read the schema version and the
// database clock.
//
// # Housekeeping
//
// Lease rows are never deleted (their token only grows). Expired sessions that hold no lease and
// the memberships of expired sessions are deleted by Housekeeping, which every backend runs in
// the background once a minute (WithHousekeepingInterval).
//
// # Errors
//
// Transient failures (connection loss, timeouts, deadlocks, serialization failures,
// SQLITE_BUSY) match spi.ErrUnavailable and are retried by the client. An operation the
// database rolled back to break a deadlock (routine under contention on MySQL/MariaDB: an
// acquire locks the lease row before the holder's session row, the holder's release and close
// the other way round; rarer on PostgreSQL) or for a serialization failure is first run again
// by the backend itself, up to four times: nothing of it took effect; a missing schema matches
// spi.ErrSchemaMissing; invalid names spi.ErrInvalidName (before any I/O); invalid options and
// DSNs spi.ErrInvalidOption; authentication and privilege errors are permanent. TLS failures
// (PostgreSQL sslmode=verify-ca/verify-full with a certificate that does not verify,
// sslmode=require to a server without TLS; MySQL tls=true to a server without TLS or with a
// certificate that does not verify) match spi.ErrTLS and are permanent: retrying cannot fix
// them. No error shows a DSN's password: DSNs are redacted (internal/dsn) and the drivers' own
// DSN parse errors are quoted scrubbed of every credential, never wrapped.
package sql
