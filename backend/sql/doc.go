// Package sql is Simba's SQL backend: the Backend SPI (with spi.Inspector, spi.LeaseInspector, spi.Queuer, and
// spi.Hinter on PostgreSQL) on PostgreSQL (pgx/v5), MySQL 8 / MariaDB 10.11 (go-sql-driver/mysql) and SQLite
// (modernc.org/sqlite, no cgo), driving the statements generated from spec/sql.yaml. Every
// operation runs the steps the spec's operation table declares for the dialect
// (wire.SQLDialect.Operations: statement order, transaction or pipelined batch, which named
// decision reads which values), interpreted over the one neutral queries interface of
// generated/sqlq, which adapts each dialect's sqlc package (generated/sqlc/<dialect>).
//
// Import it under another name, as it shadows database/sql:
//
//	import simbasql "github.com/simba-go/simba/backend/sql"
//
//	b, err := simbasql.Open(ctx, "postgres://simba@db.internal/app", simbasql.WithAutoMigrate())
//	client, err := simba.New(b)
//
// # Waiter queues
//
// The backend implements spi.Queuer with the table simba_waiter: AcquireQueued registers a
// waiting session (or keeps its place) in the acquire's own transaction, and a free lease goes
// only to the first live waiter, for Acquire too. An entry lives with its session
// (spi.SessionQueue, QueueEntriesLiveWithSession true on every dialect): each keep-alive moves
// the expiry of the session's live entries to the session's renewed expiry (spec/sql.yaml:
// keep_alive_waiters in PostgreSQL's keep-alive batch; keep_alive_waiters_join on
// MySQL/MariaDB and keep_alive_waiters_correlated on SQLite, a statement after the renewal),
// so a waiter keeps its place however long ago its last AcquireQueued was, and attempts again
// only at the holder's remaining time or on a hint, not also before its own entry's expiry (a
// client waiting behind a live holder at TTL 2 s made 1.0 acquire calls per TTL where it made
// 1.5, on each dialect), and a database outage drops its place only with its session. On
// MySQL/MariaDB and SQLite, where every keep-alive statement costs a round trip or a turn at
// the file, the keep-alive runs that statement only while the backend knows the session may
// have entries (it sent an AcquireQueued and has not since seen the name granted or withdrawn,
// nor the session closed or expired): a session that waits for nothing pays nothing for the
// queue, and one that waits pays one statement per keep-alive. A Withdraw that fails runs
// again with the session's next keep-alive (unless the session waits for the name again
// first), as the entry would otherwise hold a free lease back while the session lives; an
// AcquireQueued of the name waits for a withdrawal of it still running (that retry, or a
// Withdraw whose caller gave up), which would otherwise delete the entry it makes and cost the
// waiter its place. An
// earlier 5.x client's keep-alive does not move its entries: they lapse at its session's
// expiry as of its latest queued acquire, and it re-attempts before then as it always did.
// On MySQL/MariaDB and SQLite the queue is read
// and written under the lease row's lock (the acquire transaction). On PostgreSQL a plain
// Acquire stays one statement that reads the queue in its snapshot. AcquireQueued tries that
// statement first (a grant, to a free lease or to the first waiter, costs what Acquire costs)
// and only after a HeldBy runs it again in a short transaction after locking the lease row,
// registering the waiter there, so a registration never races a take that has begun under the
// lock. A plain Acquire (TryLock) takes a free lease only if the
// lease row it locked is the version of its snapshot: when anything wrote the row after the
// snapshot (a registration, a release), it does not take the lease and reports HeldBy (or runs
// again in a new snapshot), so it never passes a waiter that registered while it waited on the
// row's lock.
//
// # Construction
//
// Open takes a DSN (postgres://, postgresql://, mysql://, sqlite://path) and owns the pool it
// opens; NewPostgres, NewMySQL and NewSQLite take the user's own pool and leave it open on Close.
//
// Open does no I/O unless WithAutoMigrate is given. For SQLite, Open refuses in-memory
// databases (they cannot coordinate anything) and adds the busy_timeout and foreign_keys
// pragmas unless the DSN sets them; unless the DSN sets a journal_mode, its backend puts the
// file in WAL mode at its first operation that may write (not Inspect, which changes nothing on
// the file), with a warning when the file already held tables in another mode (see Open);
// NewSQLite runs the session setup on every connection of the user's pool itself, and leaves
// the journal mode to the user. The SQLite backends on one file take turns at it, those of one
// process in the order they come and those of different processes through advisory locks on
// a sidecar file, "<file>-simba-gate", which they create next to the database at their first
// operation that may write (Inspect, which only reads, neither takes it nor creates it; see
// NewSQLite); keep-alives go first. No call waits there for more than half the time left to its deadline
// (a second without one): a process that was stopped while it held the gate slows the others
// down, it does not hold them up. One stopped inside a write does hold them up: it keeps
// SQLite's own write lock on the file (its WAL write lock), and no other process can write
// there, keep-alives included, until it runs again (seen from outside, 2026-12-04: a process
// locking in a loop, SIGSTOPped at random, held the WAL write lock in 6 of 8 stops and only
// the gate in the other 2). A write transaction from outside Simba on the file (the sqlite3
// shell's BEGIN IMMEDIATE, the application's own long write) holds them up the same way: the
// calls wait in SQLite's busy handler until their deadline, and on Linux that error names the
// process holding the write lock (read from /proc/locks). A call whose deadline is longer than
// busy_timeout (10 s unless the DSN's _pragma=busy_timeout says otherwise) fails with
// SQLITE_BUSY instead, retryable (spi.ErrUnavailable) like the deadline: the lock lasts as
// long as the other transaction and nothing but its end lifts it, after which the call
// succeeds; its error names the file and that another process (on Linux, which) holds its
// write lock. PostgreSQL has no such lock, but
// acquire_queued's transaction locks session rows FOR SHARE (the caller's, and in a takeover
// the holder's) and the lease row: a process stopped inside it, or whose link lost the replies
// of its first round trip, kept them until the server found the client gone (TCP keepalive,
// 2 h by default), and the keep-alives of those sessions waited behind it until the sessions
// expired (TestPostgresStoppedInsideATransactionDoesNotHoldUpKeepAlives: TTL 9 s, the holder's
// session expired at the 4th keep-alive). The backend therefore sends a transaction-local
// idle_in_transaction_session_timeout (set_config(..., true)) with the BEGIN of each of its
// transactions, in the same round trip, once a session opened: a third of the shortest
// session TTL the backend opened, at least 1 s. The server ends a connection idle inside such
// a transaction for longer (FATAL 25P03), its locks go with it, and the next keep-alive goes
// through (the second, in that test); the stopped process, when it runs again, gets a
// retryable error, and its pool drops the connection. Being transaction-local, it is sent on
// any pool, the application's own (NewPostgres) included: a connection keeps its own setting
// outside Simba's transactions. MySQL/MariaDB
// would, through InnoDB's row locks: a process stopped inside one of its transactions keeps that
// transaction's row locks, and acquire_read_lease locks the holder's session row in share mode,
// so the holder's keep-alive waits in LOCK WAIT behind it (trial27, MariaDB 10.11, before the
// fix: 20 goroutines in each of 3 processes locking 30 names, one process SIGSTOPped for 18 s;
// the other two lost their sessions 4 times each, and their pools grew until the server refused
// connections, 1040). The backend therefore sets MariaDB's idle_transaction_timeout (10.3+) on
// each connection of Open's pool (or of a pool made on MySQLConnector; another pool, which the
// application may share, is left as it is) that it uses for a transaction, the first time it
// does once a session opened (one more round trip per connection): a
// third of the shortest session TTL the backend opened (the renewal interval, which bounds every
// call), at least 1 s, in whole seconds. The server ends a connection idle inside a transaction
// for longer, its locks go with it, and the holder's next keep-alive goes through; the stopped
// process finds its connection gone when it runs again and retries. The bound is fixed per
// connection: a shorter TTL opened later applies to connections new from then on (the pool
// replaces its connections). MySQL 8 has no such variable (it refuses it, 1193, and the backend
// stops asking): there a stopped process's transaction is ended only by wait_timeout (8 h by
// default), so a MySQL user who runs where processes may stop (SIGSTOP, a VM frozen, a
// debugger) should lower wait_timeout for Simba's user (it ends idle pooled connections too,
// which the pool reconnects). For MySQL/MariaDB, Open sets interpolateParams=true (one round trip
// per statement). For PostgreSQL, a user's pool should run PostgresAfterConnect (READ COMMITTED);
// PostgresPoolConfig makes a pool configuration from a DSN with everything Open's pool has.
//
// # Keep-alives and the pool
//
// A client keeps up to 32 calls in flight, and a pgxpool has max(4, CPUs) connections by
// default, so a keep-alive used to ask the pool for a connection behind dozens of acquires
// (those of every client made on the backend value) and could reach its timeout. The
// PostgreSQL backend now runs its other calls on at most MaxConns-1 connections of its pool
// (read once, from the pool's configuration), leaving one to keep-alives, which take none of
// those slots. That counts this backend's calls only: on a pool passed to NewPostgres that the
// application uses too, its own queries can still take every connection, and two backends on
// one pool keep one connection each, not one between them; a pool of one connection keeps
// nothing. SQLite backends run keep-alives ahead of their other operations on the file (see
// NewSQLite). Open's MySQL/MariaDB pool is unbounded, so a keep-alive never waits for a
// connection there; it keeps up to 32 connections idle (as many as a client keeps calls in
// flight; database/sql's default of 2 closed every other connection a burst of calls used, and
// the next burst dialled them again) and closes one idle for a minute, and the waker's own
// pool keeps up to 11: after a burst, count up to 43 connections per backend against the
// server's max_connections (151 by default) for that minute, or pass a pool of your own. On a
// pool passed to NewMySQL with SetMaxOpenConns(n), n ≥ 2 (read once, when NewMySQL is
// called), the backend's other calls and its waker's named-lock connections together use at
// most n-1 connections, sharing the slots, so that one is left to keep-alives
// whatever the mix: the waker's share (at most a quarter of n, one more while it watches and
// one while it ends abandoned connections or interrupts a wait) comes out of the calls' n-1 only while it holds
// connections, rather than out of the calls' share for good, and a waker connection waits for a
// slot as it waited for the pool, within its statement bound. Before, six acquires stuck on a
// row lock took all 3 connections of such a pool and a keep-alive waited for one until its
// timeout (the session lost, and every lock of its client with it). The same limits as on
// PostgreSQL hold: the application's own queries on the pool, other backends made on it, and a
// pool of one connection keep nothing.
//
// # Timeouts
//
// Every statement runs with its call's context (the client's call timeout), background work
// included: the PostgreSQL hint listener's connect, LISTENs and pings (it pings a connection
// that has brought no notification for a sixth of the shortest session TTL the backend opened,
// at most 15 s, and reconnects when the ping gets no reply within a third of that TTL, at most
// the connect timeout, so a connection gone silent is given up within half a TTL; a
// reconnect's connect and LISTENs take at most one TTL, and a listener that backs off
// reconnects at once when a session's open or keep-alive succeeds), the MySQL/MariaDB waker's named-lock statements (each bounded by what
// the server may wait in it plus 5 s), housekeeping (its interval), rollbacks and migration
// unlocks (5 s). Open's pools connect within DefaultConnectTimeout (5 s) unless the DSN sets its
// own: PostgreSQL's connect_timeout, MySQL/MariaDB's timeout. On PostgreSQL that matters most:
// pgxpool makes connections apart from the call that wanted one, with no deadline but the
// connect timeout (pgxpool's own 2 min when there is none), and the connection holds its slot
// of the pool until then; a connection that broke (a statement cut short by its context) holds
// it while pgx cleans it up, for up to 15 s. Open's PostgreSQL pool bounds both: a connect
// started by a call gets twice the time that call had left, or the connect timeout if less (a
// call of 1 s, at a TTL of 3 s, leaves a connect 2 s); a connection's cleanup gets as long as
// its connect did. In a trial (TTL 3 s, the server's replies and closes lost for 3 s) the
// session came back about 1 s after the network healed; with the connect timeout alone it
// took 4 s, and on a pool with no connect timeout and pgx's own cleanup bound 14 s (its
// connects, left to pgxpool's 2 min, hold every slot once the outage's calls have started one
// in each). While connects keep failing at that bound, one at a time gets twice the last such
// one's, up to the connect timeout, so that a server slower to set a connection up than twice a
// call (a loaded PostgreSQL forking and authenticating; calls of 333 ms at a TTL of 1 s) is still
// reached: the connection then serves the next call (none ever did before: 0 of 60 session
// opens against a server taking 1.5 s). A pool of one connection waits that one longer connect
// out after an outage (about 2 s after 3 s of lost replies at calls of 333 ms, against 0.2 s). Open's MySQL/MariaDB pool (MySQLConnector) likewise connects apart from
// the call, within the connect timeout, and hands the connection its call gave up on to the
// next: database/sql connects within the call, and go-sql-driver gave the handshake up with it.
// For a pool of your own given to
// NewPostgres, build its configuration with PostgresPoolConfig, which gives it all of that;
// NewPostgres logs a warning for a pool with no connect timeout. PostgresAfterConnect bounds
// itself by the connect timeout.
//
// # Outages
//
// A link that goes silent (a blackhole: no byte, close or reset either way) silences the
// pool's idle connections too, and pgxpool (for a connection idle under a second) and
// database/sql hand a pooled connection out again without a round trip. So on a pool Open made,
// one built from PostgresPoolConfig, or one made on MySQLConnector, a call that runs out of time
// (its deadline, one renewal interval for the client's calls) discards the connections that
// have neither read nor begun a write since the call began: on PostgreSQL it closes the pool's
// idle ones, which pgxpool then destroys; on MySQL/MariaDB it marks every such one of the
// calls' pool (the waker's is apart), which database/sql then discards as it takes it from
// the pool (closing it through the driver, which logs nothing), taking another or dialling a
// new one. After the link heals the next call thus goes out on a new connection, and a
// session rides out a silent outage that leaves it a renewal interval: at TTL 3 s, after a
// burst of calls that left the pool several connections, outages of 0.2 to 1.2 s lost none
// (before, each silenced connection failed one more call at its timeout, the keep-alive's
// included: PostgreSQL lost the session in 5 of 10, MySQL/MariaDB in 10 of 10). A pool of your
// own given to NewMySQL that is not made on MySQLConnector, or to NewPostgres without
// PostgresPoolConfig's DialFunc, is left as it is, and loses the session that way (pgxpool.New
// and sql.Open pools: 10 of 10 each, 2026-12-05); the backend logs a warning (WithLogger) the
// first time one of its calls runs out of time on such a pool. A refused or reset link
// needs none of this: its connections fail at once.
//
// # Schema
//
// The tables are those of sql/schema/<dialect>/0001_init.sql and 0003_waiters.sql (the waiter
// queues of spi.Queuer; 0002_fence.sql is package fence/fencesql's), embedded in package
// github.com/simba-go/simba/sql/schema. Apply the files in order with your migration tool, or call
// Migrate (idempotent, safe to run from several clients at once), or pass WithAutoMigrate. A
// backend checks the schema once, before its first operation: a missing or old schema version is
// an error matching spi.ErrSchemaMissing (simba.ErrSchemaMissing) that names the migrations to
// apply, in order (every one, in a database without the tables). It then compares the live tables with the schema spec/sql.yaml declares, in three or
// four catalog queries (wire.SQLSchemaCheckByName): every column with a compatible type and
// length, the bytewise collation of names and ids (PostgreSQL "C", MySQL/MariaDB ascii_bin,
// SQLite BINARY), NOT NULL, the primary keys and the foreign keys with their ON DELETE actions.
// A schema changed by hand (a dropped foreign key blocks a lease name forever; a case-insensitive
// collation merges names and revokes terms) is an error matching spi.ErrSchemaDrift (and
// spi.ErrSchemaMissing) that lists every difference and names the migrations that create the
// tables concerned (a missing simba_waiter table: 0003_waiters.sql). Migrate applies only the
// migrations the version table lacks and never alters a table, so it repairs neither: apply the
// named file again (its statements are idempotent, and create a missing table or index), or
// alter the table to match it.
//
// # Foreign records
//
// Rows no Simba client wrote never take a partition or a name from the real clients: a group
// member whose session id is not of the client form (32 lowercase hex digits) is skipped by
// KeepAlive and Members, and a lease held by such a session is freed by the next Acquire (the
// clear_foreign_holder statement: its token is kept) and acquired again; so is a free lease
// owed to a first waiter of such an id (its waiter row is dropped). Each such record is logged
// once as a warning (WithLogger; slog.Default() by default).
//
// Rows of the client form that no client could have written are judged by what they say: a
// waiter row counts only while its expiry is not beyond its session row's (so one whose session
// is gone or expired, or whose expiry was forged ahead, holds no free lease back); a session row
// whose ttl_ms is not between 1 ms and 24 h is not renewed (KeepAlive reports the session
// expired, and so do Join, which makes no membership for it, and Leave, on every dialect); a lease row of the session whose token is below 1 (on SQLite also a text) is named
// in KeepAlive's Corrupt, so the client revokes that term as corrupt-record; a lease row whose
// holder's session row is missing (a foreign key bypassed: a restore with triggers disabled,
// foreign_key_checks = 0, SQLite's foreign_keys off) is taken by the next acquire. SQLite keeps
// any value in any column and compares a text or a blob above every number: a session row whose
// expiry_ms is not an integer (a text, a blob, a real: none fits PostgreSQL's or MySQL's BIGINT)
// is taken for an expiry long past by every statement (not live, no member, its leases free,
// its waiter entries lapsed, deleted by housekeeping; it counted live for ever before), and one
// whose ttl_ms is not an integer is not renewed, as one out of range; a text the column's
// INTEGER affinity can read as an integer ('1') is stored as that integer.
//
// # Time
//
// Every expiry is decided by the database clock, as UTC epoch milliseconds: PostgreSQL's
// clock_timestamp(), MySQL/MariaDB's statement time (an expression independent of time zones
// and DST), SQLite's host clock (so a SQLite file coordinates processes of one host only). The
// client's clock is never consulted: every remaining time the backend reports comes from the
// database.
//
// # Fencing tokens
//
// A lease's token (simba_lease.token) is strictly increasing per name across holders: every new
// tenure writes max(last token + 1, the database clock in microseconds since the epoch), computed
// by the database in the acquire's statements (spec/sql.yaml); a re-acquire by the holder returns
// the same token. Tokens are therefore microsecond-scale numbers (about 1.8e15 in 2026), not 1,
// 2, 3: only their order means anything. Simba never deletes a lease row, so the token only
// grows; if an operator deletes one anyway, the clock floor still puts the next token above
// every earlier one, as long as the database's clock has not gone back by more than the time
// since that earlier grant (a restored backup or a clock stepped back could repeat tokens; so
// could restoring an old copy of the table). SQLite's clock has millisecond resolution and is
// the host's. A stored token that is negative fails the acquire with spi.ErrCorruptToken, and
// one at the int64 maximum (no successor) a new tenure with spi.ErrTokenOverflow: both
// permanent, nothing written, never wrapped or coerced.
//
// # Cost per operation
//
// Every operation is a bounded number of statements, whatever the number of leases a session
// holds: keep-alive is four statements pipelined in one round trip on PostgreSQL (one of them
// moves the session's waiter entries to its new expiry), four on MySQL/MariaDB and three on
// SQLite (one fewer without groups; one more on MySQL/MariaDB and SQLite while the session
// waits in a queue, which moves its entries); acquire, release, join, leave and
// close are one statement each on PostgreSQL (an acquire that lost a race re-runs its statement,
// at most three times in all), and acquire and close are one transaction of four and three
// statements on MySQL/MariaDB and SQLite. A waiting acquire (an election's candidacy, a Lock)
// that finds the lease held costs more: after that one statement it registers the waiter in a
// transaction (BEGIN, the session's and the lease's rows locked, the acquire again, the enqueue,
// COMMIT). On PostgreSQL the transaction is pipelined (spec/sql.yaml, acquire_queued): BEGIN,
// the two locking statements and the acquire go in one round trip, the enqueue and COMMIT in
// another, the same statements in the same order in the same transaction, so a waiting acquire
// is three round trips in all (one more each time the acquire lost a race and runs again, at
// most two), against one for the holder's keep-alive. It was seven to eight, each statement, BEGIN and COMMIT on their
// own: an outside trial measured a candidate's acquire at 0.16, 0.37 and 0.76 s through a proxy
// delaying each packet 10, 25 and 50 ms each way (the keep-alive 0.02, 0.05 and 0.10 s), and at a
// 3 s TTL, whose calls time out after the 1 s renewal interval, a 100 ms round trip made the
// candidates' acquires time out, each an outage in the log. Through a link delaying each round
// trip 10 ms, BenchmarkPostgresWaitingAcquire takes 34 ms (3 round trips) where the unpipelined
// transaction took 77 ms (7), 2.3 times as long. MySQL/MariaDB (go-sql-driver pipelines nothing)
// runs the transaction statement by statement, with no first try: BEGIN, four statements and
// COMMIT, six round trips; SQLite is local. Keep a waiting acquire's round trips well inside a call's
// timeout, a third of the TTL.
//
// A release on PostgreSQL commits without waiting for its WAL flush: nothing relies on a release
// being durable (the term was revoked before it, a release lost in a crash is repeated once a
// keep-alive lists the lease, and the grant that follows a release waits for the flush of both).
//
// # Hints
//
// On PostgreSQL every release (and the releases of a closed session) NOTIFYs the lease name on
// the lease's own channel, simba_rel_ followed by the hex MD5 of the name (wire.SQLLeaseChannel;
// and on simba_released, which only clients of earlier 5.x releases LISTEN on, for a rolling
// upgrade), and so does a Withdraw (or a close) of the waiter a free lease was owed to (no live session holds
// it and no live waiter was ahead: the next waiter, told HeldBy by the withdrawn one with that
// entry's time left, up to a TTL, attempts again at once; a withdraw from a held lease or behind
// a live first waiter NOTIFYs nothing, and an earlier 5.x client's withdraw NOTIFYs nothing at
// all; a waiter ahead whose own withdraw or close is still in flight does not count, so of two
// waiters leaving at once the second notifies too, and a third woken by the first's notice
// before the second committed is woken again; and a release that commits as the first waiter
// withdraws is seen by the withdraw, which locks the lease row before it decides, in one
// pipelined transaction: before, a release committed under the withdraw's snapshot left it
// silent, and the next waiter, woken by the release before the withdraw's commit, was told
// HeldBy the withdrawn waiter and slept up to a TTL), and every join or leave (and a close, for each group the session left) the group
// name on the group's own channel, simba_grp_ followed by the hex MD5 of the group name
// (wire.SQLGroupOwnChannel; and on simba_group, for earlier 5.x clients likewise). Hints LISTENs
// on a dedicated connection that reconnects with backoff (doubling from 50 ms to a third of
// the shortest TTL, 5 s before a session opened; it starts over only after a connection that
// stayed up for at least the backoff, so a server or proxy that accepts the connection and
// drops it at once is retried with growing waits, not 20 times a second), and that it gives
// up when it goes silent (see Timeouts), on no channel of its own: on the channel of each name a session of the
// backend waits for (from an acquire's HeldBy reply until its grant, Withdraw, close or expiry,
// or two TTLs without an acquire of it) and on the channel of each group a session of the
// backend takes part in (from a Join being sent while the session is a member: until its
// Leave, close or expiry, or two TTLs without a Join or keep-alive naming the group; and for a
// second after a Members read), each UNLISTENed a second after. So an Unlock wakes only the
// processes that wait for that name, and a membership change only those in the group; a
// process that waits for nothing and is in no group LISTENs on nothing, and PostgreSQL does not
// signal it at all. Once a LISTEN is in, a Released hint for its name makes the waiters attempt
// again, which covers a release made before the LISTEN took effect, and a GroupChanged hint for
// its group makes the members read the members again, which covers a change made between a
// Join (or the members read after it) and the LISTEN. A release or membership change by an
// earlier 5.x client notifies simba_released or simba_group only: a new waiter learns of it at
// its retry, a new member at its next keep-alive (latency, never safety). SQLite has no server to push, but all
// its clients share one host: while an acquire has found a name held, the backend reads PRAGMA
// data_version on a connection of its own whenever the database file or its WAL is written
// (inotify on Linux; elsewhere a 2 ms stat poll) and, when another connection committed, reads
// those leases and hints the free ones as released. MySQL/MariaDB push nothing either: the
// holder's backend keeps a named lock per held lease (GET_LOCK, all on one connection of its
// own) for the tenure, and a waiting backend blocks in GET_LOCK on that lock on a connection of
// its own (at most eight names at once; beyond those, one more connection reads which of the
// other waited-for leases are free, in one statement every 10 ms, while any is waited for),
// hinting the lease as released when it gets it (or reads it free); a
// connection of these that the backend gave up on (a statement timed out: a silenced link the
// server may keep, with its named locks, until its wait_timeout) is ended with KILL CONNECTION
// from a working one, which a user may do to its own connections (when the server refuses, as
// through a proxy such as ProxySQL may, the backend logs it once and such locks last until the
// server drops the connection; the waiters then wait for their retries). A blocking wait that
// nobody needs any more (its Lock timed out or was withdrawn, or the lease was granted and the
// wait still blocks a second later) is ended with KILL QUERY from another of these connections,
// which keeps its connection open for the next wait (100 Locks that timed out while their
// backend blocked for them dialled 100 new connections before, 0 now); when the server
// refuses that, the backend logs it once and closes such a wait's connection, as before. A
// holder that cannot take its lease's named lock for a second ends the connection that keeps
// it (a waiter's silenced after the server gave it the lock), and a waiting backend whose wait
// runs out (one TTL) reads the lease row, so a lock kept by such a connection delays a hint a
// TTL at most. Either way a released lease passes to a waiting process in milliseconds rather than when the holder's
// lease would run out; the named lock and the change counter are only hints, every decision is
// the table statements'. A backend also hints its own subscribers (other clients of the process
// on the same backend) at once on a release it makes, on every dialect when a session of the
// backend waits for the name (so an uncontended Lock and Unlock wakes nobody). Waits are kept
// per session: when two sessions of one backend wait for a name, the grant to one leaves the
// other's wait, and the hints owed to it, in place. A wait noted only after the release it
// waits for still gets its hint: from the LISTEN's catch-up hint on PostgreSQL, from the read
// of a newly waited name's lease on SQLite, from the first probe of the named lock on
// MySQL/MariaDB. Group changes are pushed on PostgreSQL; on
// SQLite for two TTLs after a session of the backend joined the group: its waker reads the
// group's members (on the same connection, at most every 20 ms, when the change counter moved)
// and hints GroupChanged when they differ from the last the client read, so members that start
// a group together hand each other their partitions at once (the first to join saw only
// itself and took them all: until its next keep-alive showed the others, 5 s at the default
// TTL). Otherwise, and on MySQL/MariaDB, a member learns of a join or a leave at its next
// keep-alive (every renewal interval, TTL/3), so a partition group settles within about one
// renewal interval there (a trial at TTL 3 s: a leaver's partitions taken over after 0.5 s at
// the median, a join settled after 1 s), against tens of milliseconds on PostgreSQL.
//
// # Inspection
//
// Inspect (spi.Inspector) lists every lease with its holder, owner, token and the holder's time
// left (a lease whose holder expired is shown free: anyone may take it over), every live session
// and every group's live members. InspectLease (spi.LeaseInspector) reads one lease as Inspect
// lists it, in one statement by primary key (what fence.LeaseVerifier reads per check). A row
// no client could have written is never shown free, nor its token verified: it comes with
// spi.LeaseInfo.Unreadable saying why and its time left unknown: a negative token (every acquire
// fails with spi.ErrCorruptToken), a token at the int64 maximum on a lease that is free or
// whose holder expired (every acquire fails with spi.ErrTokenOverflow and writes nothing: no
// token wraps or repeats; held by a live session, such a lease is shown held, and its holder
// keeps the token), a live holder that is not a client session id (the next acquire frees it,
// keeping its token), a holder session whose expiry lies beyond the longest TTL a client opens
// (24 h; honoured as held until it passes).
// SchemaVersion and DatabaseNow read the schema version and the database clock.
//
// # Housekeeping
//
// Lease rows are never deleted (their token only grows; see Fencing tokens). Expired sessions that hold no lease and
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
// by the backend itself, up to four times: nothing of it took effect. What then still fails for
// losing to concurrent transactions (a deadlock victim or serialization failure after the last
// attempt: PostgreSQL 40P01, 40001, MySQL/MariaDB 1213; a row lock not granted in time:
// PostgreSQL 55P03 after lock_timeout, MySQL/MariaDB 1205 after innodb_lock_wait_timeout) also
// matches spi.ErrContended: the server answered, so the client retries it but takes it for
// contention, not an outage (logged at DEBUG, no WARN "simba backend error", no probe, no
// "reachable again"). A write a read-only server refuses (PostgreSQL 25006: a hot standby, as
// after a failover that left the DSN's address on a standby, or default_transaction_read_only;
// MySQL/MariaDB 1290 --read-only, 1836, 1792) is retryable, as a failover may make the server
// writable again, and its message says the server is read-only and what to check
// (pg_is_in_recovery(), transaction_read_only; @@global.read_only). The client's outage probe
// (Members of the probe group) checks that the server takes writes, with one more statement
// (the dialect's wire.SQLDialect.ReadOnlyCheck), so a read-only server keeps the outage open,
// one outage with one "reachable again" once it takes writes, rather than a probe that
// succeeds while every write still fails. On MySQL/MariaDB, when read_only is on, the probe
// also sends a write that changes nothing (wire.SQLDialect.ReadOnlyWriteCheck, an UPDATE of
// simba_member matching no row): a user the setting does not bind (MariaDB's READ_ONLY ADMIN,
// MySQL's SUPER or CONNECTION_ADMIN without super_read_only), whose writes succeed, passes
// the probe; for any other user the server refuses it (1290) and the server is read-only. A missing schema matches
// spi.ErrSchemaMissing, a drifted one spi.ErrSchemaDrift too; invalid names spi.ErrInvalidName
// (before any I/O); invalid options and DSNs spi.ErrInvalidOption (so does, at the first call, a
// MySQL/MariaDB DSN parameter go-sql-driver/mysql does not know, which it sets as a session
// variable on every connection and the server refuses: 1193, 1231, 1232, 1238); a corrupt or exhausted stored
// token spi.ErrCorruptToken or spi.ErrTokenOverflow; authentication, privilege and data errors
// (MySQL's out-of-range 1264 and 1690 included) are permanent. Refused credentials or privileges
// match spi.ErrAccessDenied (simba.ErrAccessDenied), with an error that says which
// ("authentication refused" or "privilege refused"), the user and server, the cause and what
// to do: PostgreSQL's class 28 (28P01 an incorrect or missing password: ALTER ROLE … PASSWORD;
// 28000 a role without LOGIN: ALTER ROLE … LOGIN, a role that does not exist, no pg_hba.conf
// entry, told apart by the server's English message, with a general answer for another
// language) and 42501 (insufficient_privilege: a missing GRANT on Simba's tables);
// MySQL/MariaDB's 1045, 1698, 1251, 1275, 1820, 1862, 3118 and 4151 (a wrong password or an
// unknown user; no password given; an authentication method the driver does not speak or
// allow; an old password hash; a password expired, 1820/1862: a new one, ALTER USER …
// IDENTIFIED BY, or PASSWORD EXPIRE NEVER; an account locked, 3118/4151: ACCOUNT UNLOCK), the
// driver's refusals of an authentication method, and 1044, 1142, 1143, 1227 and 1370 (a missing
// privilege); SQLite's SQLITE_PERM and SQLITE_AUTH, and a file SQLite cannot open or write
// because this process may not (permission denied on the file or its directory; not a file
// opened with mode=ro, nor a read-only file system). A table the schema check does not see
// because of a missing privilege is access denied, not a missing schema: before it reports a
// table missing, the check asks the catalog (PostgreSQL: a role without USAGE on a schema its
// search_path names, which the search_path then skips, so every table there reads as missing,
// 42P01; wire.SQLSchemaCheck.AccessQuery) or probes the table (MySQL/MariaDB, whose
// information_schema hides a table on which the user holds no privilege, e.g. table-level
// grants made before a later migration's table: the probe's 1142; a table really missing to a
// user who may see it answers 1146; wire.SQLTableCheck.ProbeQuery), and the error matches
// spi.ErrAccessDenied, naming the privilege, the objects and the GRANT to run; so does Migrate
// by such a PostgreSQL role, whose CREATE TABLE finds no schema to create in (3F000). A
// search_path that names no schema the role may use (none exists) makes Migrate fail
// permanently (3F000 was retried as an outage), saying so. A MariaDB user with SELECT alone
// passes the check (information_schema shows it the foreign keys without their ON DELETE,
// which the check then accepts) and is refused at its first write (1142).
// TLS failures
// (PostgreSQL sslmode=verify-ca/verify-full with a certificate that does not verify,
// sslmode=require to a server without TLS; MySQL tls=true to a server without TLS or with a
// certificate that does not verify) match spi.ErrTLS and are permanent: retrying cannot fix
// them. With sslmode=prefer (the default) pgx tries TLS and then a plain connection: a refused
// TLS attempt is then no failure, and the error is the plain attempt's (a restarted PostgreSQL's
// "the database system is starting up", 57P03, is retryable); its message leads with the
// plain attempt's error, on one line, and names the refused TLS attempt after it as
// sslmode=prefer's (pgx listed the TLS refusal first, so an outage read as a TLS problem;
// sslmode=disable skips that attempt). No error shows a DSN's password: DSNs are redacted (internal/dsn) and the drivers' own
// DSN parse errors are quoted scrubbed of every credential, never wrapped.
package sql
