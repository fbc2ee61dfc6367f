/*
Package redis is Simba's Redis backend: it implements the SPI (spi.Backend, with the spi.Hinter,
spi.Inspector, spi.LeaseInspector and spi.Queuer capabilities) with github.com/redis/go-redis/v9 on the generated Lua scripts
(package luascripts) and key layout (package wire) of spec/redis.yaml. It needs
Redis 6.2 or later (7 recommended: scripts replicate by their effects).

# Construction

New takes any redis.UniversalClient: a *redis.Client (standalone, or Sentinel failover from
redis.NewFailoverClient), a *redis.ClusterClient (routeBySlot is then on, see below) or another
implementation; Close leaves it open. Open takes a DSN (see ParseDSN):

	redis://[user:password@]host[:port][/db][?wait_replicas=1&wait_timeout=500ms&strict_durability=true&...]
	rediss://...                                   (TLS)
	redis+cluster://[user:password@]host:port,host:port[/][?...]
	rediss+cluster://...                           (Cluster over TLS)
	redis+sentinel://[user:password@]host[:port],host[:port]/master[/db][?...]   (Sentinel)
	rediss+sentinel://...                          (Sentinel over TLS)

with the ACL user and password in the user information; Close then closes the client. A bad
DSN fails with an error matching spi.ErrInvalidOption that names what is wrong (and never shows
the password). Over TLS, a certificate that does not verify, and a server that speaks plain
RESP (found fast: a plain-text Redis never answers a TLS handshake, so after 500 ms, or half
the call's time if that is less, the dialer asks it a plain-text PING on a second connection),
fail with a permanent spi.ErrTLS instead of
being retried until the caller's context ends (the dialer retries only transient dial
failures, see ParseDSN). A DSN the server cannot serve fails with a permanent error that says
what to change and matches spi.ErrInvalidOption, as any DSN that cannot work does: a database
out of range or other than 0 on a Cluster node, redis+cluster:// at a server without cluster
support (use redis://), and redis:// at a Cluster node (use redis+cluster://). Credentials: a wrong password, an unknown user,
or none at a server that requires one fails with a permanent error matching ErrAuth; a password
for the default user at a server that configures none (which Redis would accept, and go-redis
run unauthenticated without a word) is refused at the first OpenSession with a permanent error
matching ErrAuth and spi.ErrInvalidOption: drop it from the DSN or set one on the server.
ErrAuth matches spi.ErrAccessDenied (simba.ErrAccessDenied), and so does a refused privilege:
an ACL user without a command, key or channel Simba needs (the server's NOPERM, on a call or
at the first Hints) fails with a permanent error matching spi.ErrAccessDenied (not ErrAuth).
Each names the user, the server (a Cluster's seed nodes) and what to do.

Every Simba client made on one Backend shares its go-redis client's pool (PoolSize, 10
connections per CPU by default), while each keeps up to 32 calls in flight. So that a
keep-alive never waits for a connection behind the others, the backend runs its other calls on
at most PoolSize-1 connections (on a Cluster client, PoolSize-1 calls to all nodes together),
leaving one to keep-alives. That counts this backend's calls only: the application's own
commands on a client passed to New can still take every connection, two backends on one
go-redis client keep one each, and a client type other than *redis.Client and
*redis.ClusterClient keeps nothing. The server's own time is not covered: Redis runs one script
at a time, and a keep-alive of 64,416 leases ran 0.36 s inside it, which every other call to
that server, other clients' keep-alives included, waited for.

# Layout and time

The lease simba:lease:{name} is a hash {session, token, expires, owner} that Simba never
expires or deletes; a lease is live while its session field is set and its expires (the holder
session's expiry) is in the future. The session simba:session:{sid} is a
hash expiring at its expiry (PEXPIREAT), with its sets :leases and :groups (maintained in
standalone mode); a group is a sorted set of session ids scored by their session's expiry. Every
expiry is Redis TIME, read inside the scripts: the client's clock is never sent. Session ids are
128 random bits as 32 lowercase hex, made by the client, so a retried OpenSession reuses its id.

Waiters (spi.Queuer: fairness across sessions) live in the lease's slot: simba:waiters:{name}
holds the waiting session ids scored by arrival and simba:waiting:{name} the same ids scored by
their entry's expiry (the session's expiry as of its latest queued acquire). The acquire
scripts take a queued flag: a free lease goes to the first live waiter (anyone else gets HeldBy
naming it, without an owner), a queued acquire that is refused registers its session or keeps
its place, and a grant removes the grantee's entry; the withdraw script removes an entry and,
when the free lease was owed to it (no live holder, no live entry ahead), publishes the name on
the lease key's channel as a release does, so the next waiter, told HeldBy by the withdrawn
session with that entry's time left (up to a TTL), attempts again at once (an earlier 5.x
client's withdraw script, which its own SHA1 still names, publishes nothing). The
lease hash's waiters field says the queue may hold entries, so an acquire with nobody waiting
reads no queue key. A waiter that crashed drops out when its entry expires (no later than its
session), one that gave up withdraws, and one whose session is closed is withdrawn by the
close: close_session touches no queue (Redis keeps no per-session set of waited names), so
CloseSession first runs the withdraw script for each name the backend's own session queued for
and has not been granted or withdrawn from, in the round trip that reads the session's sets
(on a Cluster, in the pipelined round of its releases), so that a closed first waiter wakes
the next one as a withdraw does. A withdraw that fails there does not fail the close: it is
logged at WARN and that entry lapses on its own (up to a TTL). A queued acquire of a name
waits for a withdraw of the same session and name still in flight (one whose caller gave up
goes on to its end), so that the withdraw can neither delete the entry the acquire makes nor,
once answered, make the backend forget it (the close would not withdraw it). A session closed through
another backend than the one that queued it leaves its entries to lapse. So does a live waiter's entry when an outage spans its
expiry (the waiter's re-attempt before it could not land), and a restart without AOF loses the
queue keys: the waiters register again, in the order they come back (see spi.Queuer).

Every call is EVALSHA with EVAL on NOSCRIPT (after a restart, failover or SCRIPT FLUSH), and
every key a script touches is in KEYS. A release publishes the lease name on the lease key's
channel, and so does a withdraw of the waiter a free lease was owed to; a membership change
publishes the group name on the group key's channel.

# Fencing tokens and durability

A lease's token is strictly increasing per name across holders: every new tenure's token is
max(last token + 1, Redis TIME in microseconds since the epoch), computed inside the acquire
script (spec/redis.yaml); a re-acquire by the holder returns the same token. Tokens are therefore
microsecond-scale numbers (about 1.8e15 in 2026), not 1, 2, 3: only their order means
anything. They stay below 2^53, where Lua's numbers (doubles) are exact, until the year 2255.

The token lives in the lease hash, and Redis can lose the hash: an allkeys-* maxmemory-policy
evicts it (it never expires, so volatile-* policies and noeviction leave it alone), a restart
without AOF loses it (RDB snapshots lose every write since the last save; Debian's and Redis's
own default configuration is appendonly no), and so do a FLUSHALL, an operator's DEL and a
failover that loses the last writes (see Replication and failover).

Losing the hash of a held lease breaks mutual exclusion, not only the tokens' order: the
lease is free on the server while its holder still believes it holds it (its term IsValid),
so a waiter is granted it at once, and both hold it until the holder's next keep-alive finds
the hash gone or taken and revokes its term — up to one renewal interval (TTL/3 by default)
after the server answers again. A trial restarted a server without AOF under two elections at
TTL 15 s: the two leaders overlapped for 1.3 s, and only the fenced resource (fencesql)
refused the old leader's writes. During that window fencing tokens are the only protection,
so fence every write the lease guards (package fence). Tokens still increase: the next grant
starts from the clock floor instead of from 1, so tokens increase as long as the server's
clock has not gone back by more than the time since the last grant; a clock that goes back (a
server restored on another host, a clock stepped back) could also repeat a token, and then
fencing cannot tell the two holders apart either.

For mutual exclusion across restarts run Redis with maxmemory-policy noeviction or a
volatile-* policy and with appendonly yes. appendfsync then decides what a crash can still
lose: always fsyncs the AOF before Redis replies, so no acknowledged grant or renewal is lost
(the safest, and the slowest); everysec (the default) can lose about the last second of writes
to a power loss or an operating system crash (and, as redis.conf says, a write to a crash of
the Redis process itself); no leaves the flush to the operating system (on Linux about every
30 s), which a host crash can lose. A restart of the Redis process alone (SIGTERM, a restart
by the service manager) loses nothing with AOF on. Each lost grant or renewal opens the window
described above.

At the first OpenSession the backend reads those settings on the server (on a Cluster, on every
master) with CONFIG GET, falling back to INFO where CONFIG is refused (an ACL without it, a
renamed command), and logs a warning through WithLogger's logger (slog.Default() by default)
for each server that could lose lease hashes, or that it could not check. Its message is one
short line, the setting, the risk and the fixes, such as "simba: Redis at 127.0.0.1:6379 has
appendonly no: two sessions can hold one lease after a restart; set appendonly yes, or refuse
such a server: strict_durability=true (WithStrictDurability)"; its attributes hold the rest:
the settings read (addr, maxmemory_policy, maxmemory, appendonly, checked), why a server could
not be checked (error), what the setting loses (evicts, on_restart) and the risk in full
(risk: mutual exclusion breaks, as above). CheckDurability runs the same check on demand. WithStrictDurability, or strict_durability=true in the DSN (for Open,
the package open and the simba command), turns the warning into a refusal: OpenSession then
fails with a permanent error matching ErrNotDurable; use it where a second holder is not
acceptable. The check reads maxmemory-policy and appendonly only: not appendfsync, and not
whether a failover can lose writes (replication is asynchronous; see WithWaitReplicas).

A stored token that is not a plain decimal integer (say "0x10", "-5" or "abc", written by
someone else) fails the acquire with a permanent error matching spi.ErrCorruptToken, and one
whose successor would reach 2^53 with spi.ErrTokenOverflow; nothing is written, and the token
is never coerced (Lua's tonumber would read "0x10" as 16).

# Standalone and Sentinel

Each SPI call is one script call (one round trip), whatever the number of leases: KeepAlive
renews the session, moves the expiry of every asked lease the session holds and refreshes its
group memberships in one keep_alive call (BenchmarkKeepAlive10000: 10,000 leases, one round
trip). Acquire reads the session's expiry and owner from the session hash in the same script.
CloseSession reads the session's sets (one round trip), then releases everything in one call.

# Redis Cluster (routeBySlot)

With routeBySlot every script call stays inside one hash slot (the braces of every key are a
hash tag). Acquire runs acquire_at, touching only the lease key: the holder's liveness comes
from the lease hash alone, and the acquiring session's owner and expiry come from the client —
the expiry as Redis computed it in the session's last keep-alive, refused as SessionExpired if
already past. The backend therefore remembers, per session it opened, its owner, its latest
expiry and the names it asked to acquire and the groups it asked to join (each recorded when
the acquire or join is sent, so that a grant or membership whose reply was lost, or that lands
while CloseSession is under way, is released or left too; dropped on HeldBy, on release, on a
join refused as Expired and on leave), for CloseSession: the session's sets are not maintained
in Cluster mode, their keys being in other slots.

KeepAlive is bounded by the number of masters, not of leases: one keep_alive call on the
session's slot renews the session and returns its new expiry E; then one pipelined round, in
which the backend sends each master its part concurrently on that master's own client, runs
keep_alive_leases(E) once per hash slot of the asked names and keep_alive_group(E) per group
(ZADD XX GT: refresh the membership's score to E, never join; then the live members). That is 1
session call + 1 pipelined round per master. (Not through the Cluster client's pipeline: with a
master down it retries that master's part before returning any, and on running out of time marks
every call failed. A call a master redirects or refuses, its slot moving, is sent again until
the slot settles: see Slot migrations.)

A keep-alive fails as a whole, with a retryable error, when the session's own call fails (its
master is down, say): nothing was renewed that the client may count on, and it keeps its
previous deadline. Once the session is renewed, a master that fails its part of the round (down,
paused, cut off, or its WAIT falling short) costs only what lives on it: the reply leaves out
that master's leases, naming them unrenewed (spi.KeepAlive.Unrenewed), and the client revokes
their terms at once, as not renewed (reason deadline, not taken-over: nobody took them), while the leases
the other masters renewed stay held under the session's new deadline. That is safe: a listed
lease was renewed to E by a call that succeeded, and a left-out one was not renewed and lapses
at its older expiry (a term adopted from a grant after the keep-alive was sent is not revoked by
its absence, but stays bounded by its grant's own remaining time until a keep-alive lists it).
A group whose master failed is left out of the reply's members; the client keeps its view. A
permanent failure (a script error, a denied command) still fails the whole keep-alive. Failing
as a whole on any failure, as the backend once did, let the client's session deadline pass while
the session was renewed at the server: one master's failure cost every client every lease on
every master for about a TTL (TestClusterKeepAliveSurvivesAMaster). The client re-acquires a
revoked lease once the master's replica takes over; a call that failed after the master applied
it leaves that lease held a little longer than the client believes, which is harmless: it lapses.

That needs the other masters to serve meanwhile. With Redis's default
cluster-require-full-coverage yes, once the nodes mark a failed master FAIL (after
cluster-node-timeout) every node answers CLUSTERDOWN until its replica is promoted, so every
session's keep-alive fails for that window, on whatever master the session lives: an outside
trial (chaos/trials/trial34, cluster-node-timeout 1 s, TTL 3 s) saw the keep-alives of
clients whose sessions lived on healthy masters fail, and one such session lost (deadline),
when a master was killed or paused.
cluster-require-full-coverage no keeps the other masters serving their slots.

A master paused (SIGSTOP, a long GC-like stall, a frozen VM) for less than the TTL and less than
cluster-node-timeout, so that no failover happens, counts as failed for each keep-alive whose
part it does not answer within the call timeout: its leases' terms end (taken over) although
nobody took them. Measured on a private Cluster at TTL 3 s (cluster-node-timeout 5 s), a
master paused 2 s: the terms on it were revoked 1.2 s into the pause, the session and every
other lease stayed; once it answered, the election and the group partitions were taken back
within 20 ms with the same tokens (the lease hashes still named the session: a re-acquire by
the holder keeps its token), while a lock's Held stays lost (Unlock it and Lock again) and
another client waiting for that lock got it 3.2 s after the pause began, once the old lease had
lapsed. A pause longer than cluster-node-timeout fails the master over to its replica; the
paused master, resumed, may still take writes before it learns it was demoted, and those are
lost (see WithWaitReplicas).

Two races are closed in the backend. A keep-alive that renews the session to E2 while an
Acquire carrying the older E1 is in flight may run its keep_alive_leases on the lease's slot
before the grant lands, leaving the lease at E1 while the engine adopts the term under E2's
deadline; so when the session's expiry moved while an acquire was in flight, the grant is moved
to the newer expiry (one keep_alive_leases call) before it is reported. That call may find the
grant gone: the client sends a name's acquire without waiting for its own release of the
previous term, so the acquire can land first and be answered as a re-acquire with the released
token, and the release then lands. The acquire is then sent again (at most twice more) and
reports the lease as it is now: a fresh grant, or the holder that came in between. It used to
fail as an outage (an "op=acquire" backend error and an early keep-alive, 2-4 per 20 s at
~4,600 lock cycles/s on one client); the grant it would have reported the client refuses anyway
(its token is not above one the session released). A Join carrying an older expiry is likewise
redone with the newer one.

Release is release_leases with the one name and token (a token ≤ 0 is never sent: 0 means any
token to release_leases). CloseSession is release_leases (any token of this session) per slot of
the names the backend recorded and leave_at per group it joined, in one pipelined round, then
close_session on the session's slot. A release's or leave's reply drops its name from that
record only if no acquire or join of the name recorded it again meanwhile: the grant of an
acquire sent while the release was in flight used to go unrecorded, and lapsed only at its
expiry after the close. A join used to be recorded only from its reply, so the membership of
one that landed while CloseSession was under way (the client's Close does not wait for a Join
in flight) stayed until the session's expiry: the other members counted the closed client,
and rendezvous hashing gave it partitions nobody led, for up to a TTL.

# Slot migrations (resharding)

While a slot moves to another master (redis-cli --cluster reshard or rebalance: CLUSTER SETSLOT
IMPORTING on the target, MIGRATING on the source, MIGRATE of its keys a batch at a time, then
SETSLOT NODE on the target, the source and the other masters), Redis runs a command on the
slot's keys only where all of them are: the source runs it while it has them all, sends it on
with ASK once it has none (the target runs it after ASKING only if it has them all, or if it
names one key), and refuses it with TRYAGAIN when they are split. A key that does not exist
counts as missing on both sides, so a script that names one that does not exist yet is refused
from MIGRATING until the target owns the slot: acquire_at (its waiter keys exist only while a
session waits), open_session (a new session's keys) and withdraw. Measured on Redis 7.0 on a
private Cluster, acquire_at on a lease whose slot moved answered: with the target IMPORTING only,
run on the source; the source MIGRATING, TRYAGAIN there (and after ASKING at the target);
the lease key migrated, ASK at the source, TRYAGAIN at the target; the target's SETSLOT NODE
done, run at the target (the source answering ASK, then MOVED). The refusals are made before
the script starts: Redis never runs it on part of its keys, so a lease is still granted once
at a time and its token still rises.

Every routeBySlot script call therefore waits for a migration within the call: a TRYAGAIN, or
an ASK or MOVED left after the Cluster client's redirections (MaxRedirects; a master's own
client, used WithWaitReplicas, follows none and has the slot map reloaded after a MOVED), sends
it again after a pause of 1 ms doubling to 16 ms, on top of go-redis's own retry backoff
(MinRetryBackoff, MaxRetryBackoff), until the call's deadline (for at most 5 s when its ctx has
none: a Simba client's calls always have one, the call timeout, TTL/3); a
keep-alive's session call and then its round each for half the time the keep-alive has left,
so that what it renewed is reported before its timeout (a lease call still refused then is
named unrenewed). Before, go-redis gave up after MaxRedirects+1 attempts (12–93 ms) and the
engine retried the Acquire after its backoff, which doubles up to the renewal interval:
BenchmarkClusterLockDuringSlotMigration, a Lock started as its slot (20,000 keys) began to
move, returned 173 ms (median) after the migration ended, 341 times an ordinary Lock, after
5.4 failed acquires; with the wait, 15.7 ms (56 times), none failed — what is left is
go-redis's own retry backoff. A migration that outlasts the call (a slot of many keys, or one
left half-done, which needs redis-cli --cluster fix) fails it at its deadline with a retryable
spi.ErrUnavailable (simba.ErrUnavailable), having written nothing (the refusal comes before the
script runs), and the engine retries it; the wait used to end after 5 s whatever the deadline,
so that with a TTL above 15 s a call failed seconds before its deadline
(TestClusterAcquireWaitsForSlowMigrationWithinDeadline).

What a migration costs a session: nothing while it ends within the session's TTL. The session's
keep_alive is refused while the migration has moved some of its three keys and not the others
(MIGRATE moves a batch of keys at a time, so a session's keys are split for a moment, or for as
long as a slow or stalled migration leaves them so): the keep-alives in between fail, retryable,
and the client keeps its session and terms until its own deadline; the first one after the
move renews them (TestClusterSessionSurvivesItsSlotMigration: a session hash moved and
its slot held half-done for two thirds of a 3 s TTL, the lock's term and token kept, two
keep-alives failed). A session's keys left split for longer than its TTL end the session,
and with it its terms. An OpenSession whose new keys fall in a moving slot waits for the move
within its call (TestClusterOpenSessionFollowsSlotMigration); a lease's Acquire does the same,
and its holder's keep-alive renews it throughout (one key per lease call:
TestClusterCallsOutlastedBySlotMigration).
Release, keep_alive_leases of one lease, and the group scripts name one key each and run on
either side throughout; the session's keep_alive and close_session are refused only while a
migration has moved some of the session's three keys and not the others, and keep_alive_leases
while it has moved some of the leases of one slot. The new master may not have a script in its cache
yet: a call it answers NOSCRIPT is sent with EVAL (the keep-alive's round loaded the script on
the master its slot map named, for up to 200 ms after a move the old one, and named the moved
slot's leases unrenewed: TestClusterKeepAliveAfterSlotMove).

# Replication and failover

Redis replicates asynchronously: a master acknowledges a write before any replica has it. A
failover (Sentinel or Cluster promoting a replica) can therefore lose the writes the old master
acknowledged last — a grant, a keep-alive or a release. A lost grant or keep-alive means the new
master has the lease free (or expiring earlier than the holder believes) and grants it to
another session while the first still holds a valid term: two holders. A lost grant also loses
its token increment, so the next grant repeats the token, and fencing cannot tell the two
tenures apart (TestClusterFailoverLosesStateWithoutWait shows it). A lost session is reported
SessionExpired by the next keep-alive and the client opens a new session; a lost release only
keeps a lease held until it expires.

WithWaitReplicas(n, timeout) closes that gap for grants and keep-alives: each waits (WAIT,
pipelined behind the script on the same connection) until n replicas acknowledged it, and fails
with a retryable error otherwise, so the client never acts on a write a promoted replica could
lack (TestClusterFailoverWithWait). Its cost is the replication delay on each grant and renewal,
and availability: while fewer than n replicas of a master are connected, grants, renewals and
session opens on it fail, and so does the client's outage probe (any master short of replicas),
so that the client logs the shortfall as one outage, ending with one "simba backend reachable
again" once a replica rejoins (TestWaitShortfallIsOneOutage). WAIT does not make Redis a
consensus system: see WithWaitReplicas. Each WAIT's timeout is the one WithWaitReplicas (the
DSN's wait_timeout) gives, at least 1 ms and below the client's renewal interval, or by default
min(DefaultWaitTimeout, TTL/6, half of what is left of the call), which fits every TTL and
renewal interval (TestDefaultWaitTimeoutFitsEveryTTL).

A replica promoted by CLUSTER FAILOVER (a managed Cluster's maintenance, not a master's failure)
loses nothing: the master pauses its clients until the replica has caught up, then answers
MOVED, which the Cluster client follows. It costs a session nothing:
TestClusterManualFailoverKeepsLeases fails over the master of a lease and of its holder's
session while the holder keeps them alive and another session asks for the lease in a loop: no
call failed, no lease named unrenewed, no grant to the other session, the token unchanged,
with and without WithWaitReplicas(1, …).

# Foreign records

Entries no Simba client wrote never take a partition or a name from the real clients. A group
member that is not a client session id (32 lowercase hex digits), such as a hand-added zset
entry with a far-future score, is skipped by KeepAlive and Members; a lease whose session field
is not a client session id (or is empty) is freed by the next Acquire (the clear_foreign script:
its holder, expiry and owner fields are deleted, its token kept) and acquired again. Each such
record is logged once as a warning (WithLogger; slog.Default() by default). A hand-written lease
whose holder has the client form is honoured until its expires field passes, like any other.

A lease hash Simba cannot read is never shown free by Inspect (so by simba status and the status
page): it comes with spi.LeaseInfo.Unreadable saying why, its holder field as the holder and
its time left unknown. What an acquire does with each such record:
  - a token field that is not a plain non-negative decimal ("abc", "0x10", "-5", "1e3"): every
    acquire fails with spi.ErrCorruptToken and writes nothing, as on the SQL backends; the
    lease needs an operator;
  - a token at or above 2^53 (which no grant writes: Lua's numbers stop being exact there),
    digits beyond int64 included: every acquire fails with spi.ErrTokenOverflow and writes
    nothing; the lease needs an operator. So does 2^53 - 1 on a lease that is free or whose
    holder expired (its next tenure would reach 2^53; a live holder keeps the token, and the
    lease is shown held);
  - a live holder that is not a client session id (above): freed by the next acquire, which
    takes it; until then no token of it is verified (fence.LeaseVerifier);
  - a lease key that is not a hash at all (a string, say): every acquire fails with a
    permanent error matching spi.ErrCorruptRecord (simba.ErrCorruptRecord) that names the key,
    the type it holds and the one Simba keeps there (read with TYPE after Redis's WRONGTYPE
    error, which names neither); the key needs an operator. So does any other call that meets
    a key of another type: a release, a join, a leave, a members read. Every script reads each
    key it touches before its first write, so such a call writes nothing (Lua scripts are not
    rolled back: a grant used to land in the lease hash before the session's lease set failed
    it). A keep-alive that names such a lease (a held lease's key written over) renews the
    session and its other leases without it, names it in spi.KeepAlive.Corrupt and logs a
    warning (once per lease, then once a minute while its key stays so, the keep-alives in
    between at DEBUG: an election on such a key names it in each keep-alive after each refused
    acquire): the lease is lost, and the client revokes that term alone, as
    simba.RevokedCorruptRecord (its RevokedError matches simba.ErrCorruptRecord; Unlock
    returns it), where the whole keep-alive used to fail, and with it the session and every
    lease it held. A group key of another type named by a keep-alive is left out the same way
    (the client keeps its last view of the group), and CloseSession releases the session's
    other leases and leaves its other groups without such keys. Inspect lists the rest of the keyspace around it, skipping
    session and group keys of another type (no client's), where one such key used to fail the
    whole snapshot;
  - the session's own record of another type (its hash simba:session:{<sid>}, or its
    :leases or :groups set, written over by something else): the session can never be
    renewed again, so it ends cleanly: the keep-alive (and a standalone acquire, join or leave)
    reports it expired, a warning names the key, the client revokes its terms as
    session-expired and opens a new session. Its leases stay held until their expiry (at
    most one TTL), as for any session that expired; CloseSession deletes its keys;
  - a holder with no expires field, or one that is not a plain decimal ("-5", "soon"): the
    spec's lease is live only while its expiry is in the future, and the script reads the
    field with Lua's tonumber, so a value it reads as no number or as a past time frees the
    lease to the next acquire (a new tenure, its token above the stored one), and one it reads
    as a future time ("1e20") keeps it held until then;
  - an expires field more than 24 hours away (simba.MaxTTL, the longest TTL a client opens
    a session with): honoured as held until it passes, like any client-form holder's record;
    Inspect does not show a Remaining of years but says the expiry lies beyond any TTL (the
    client clamps a holder's time left to its own TTL).

# Hints

Hints keeps a pub/sub connection per backend (on a Cluster, one per master; while there are
subscribers) that SUBSCRIBEs only to the channels its sessions need: a lease's released
channel while a session waits for it (an acquire of the backend found it held by another
session, until the session is granted it, withdraws, closes, or stops acquiring it), a group's
channel while a session is a member, each for a second more (so that re-lock loops do not
churn). A client thus hears of the
releases it waits for, not of every release in the deployment. A release between the acquire
that found the lease held and the server's confirmation of the subscription is caught by one
read of the lease after the confirmation (a Released hint if it is no longer held by that
holder), a membership change by one GroupChanged hint on the confirmation. On a Cluster a
channel is subscribed (plain SUBSCRIBE) on the master of its slot, where the scripts PUBLISH:
the PUBLISH reaches other nodes too, but over the cluster bus, which Redis sends with Nagle's
algorithm on (no TCP_NODELAY), so a hint heard elsewhere could come up to ~40 ms late. A
channel whose slot moves to another master (as the Cluster client learns) moves with it.
go-redis reconnects the connections and resubscribes after a connection loss; the
confirmations then do the same reads and hints. A connection gone silent (a blackhole: no
byte, close or reset either way) counts as lost: each pub/sub connection sends a PING once
it has read nothing for a sixth of the shortest session TTL the backend opened (15 s before
one opened), at least 50 ms, and is closed, and connected again, once it has read nothing
for an interval and the PING's allowance: two intervals, at least 500 ms, so that a server
or client busy for a few hundred milliseconds costs no reconnect (at TTL 1 s, stalls of
100-400 ms every 1-3 s made it reconnect 15-18 times a minute with 333 ms).

# Outages

The command connections go silent with the link too, and go-redis hands a pooled connection
out again without a round trip. So, on a client Open made or one passed to New with
WithDropSilent, a call that runs out of time (its deadline, one renewal interval for the
client's calls) closes every connection the client dialled that has neither read nor begun a
write since the call began, pub/sub connections included (a live
one reads a PONG every sixth of a TTL); go-redis's health check drops a closed connection
when it takes it from the pool and dials a new one. After the link heals the next call thus
goes out on a new connection, and a session rides out a silent outage that leaves it a
renewal interval: at TTL 3 s, outages of 0.2 to 1.2 s lost none (before, each silenced
connection failed one more call at its timeout, the keep-alive's included, and every outage,
even of 200 ms, lost the session). With TLS, whose connections go-redis does not check, each
closed connection still fails the call it is handed to, but at once rather than at the call's
timeout. A client of your own passed to New without WithDropSilent is left as it is, and
loses the session that way (10 of 10 trials with go-redis's NewClient, 2026-12-05); the backend
logs a warning (WithLogger) the first time one of its calls runs out of time on it. A refused
or reset link needs none of this: its connections fail at once.

# ACL

An ACL user (Redis 6+) needs the keys ~simba:* and, for hints, channel permissions that
cover &simba:lease:{*} and &simba:group:{*} (those two patterns, &simba:*, or allchannels:
SUBSCRIBE checks each channel against the patterns). Hints subscribes once to the channels
of a probe name and fails with a permanent NOPERM error (spi.ErrAccessDenied) without them (if the server answers
the probe within the client's read timeout, at most 5 s). A server down or silent at the first
Hints, which simba.New makes, is not checked then: the backend logs a warning that says so
(WithLogger) and checks once the server answers (a PING 1, 3, 7 … s later, at most 30 s apart,
then the probe), logging the result: an ERROR for a user without those permissions, who then
gets no hints (go-redis logs the refused SUBSCRIBEs only to its internal logger), or an INFO.

Its commands: EVALSHA, EVAL, SCRIPT LOAD, SMEMBERS, HMGET, SUBSCRIBE, UNSUBSCRIBE, MULTI,
EXEC, ZRANGE (the read after a subscription's confirmation), PING, WAIT (with
WithWaitReplicas), SCAN, TIME and ZRANGEBYSCORE (Inspect), EXISTS (InspectLease), CLUSTER
SLOTS and ASKING (Cluster clients, the latter to follow an ASK during a slot migration),
CONFIG GET or else INFO (the durability check; without either it warns that it could not
check), and inside the scripts TIME, HGET, HMGET, HSET, HDEL, SADD, SREM, SISMEMBER, DEL,
PEXPIREAT, PUBLISH, ZADD, ZREM, ZSCORE, ZRANK (withdraw), ZRANGE and ZREMRANGEBYSCORE. TestACLUser runs a backend as such a user
(with +@all).

# Timeouts and cancellation

go-redis reads and writes with a call's deadline when the client has ContextTimeoutEnabled
(ParseDSN sets it, so Open's clients have it), but it watches no
context while it waits for a reply: only closing the connection ends that wait early. A call
whose ctx has a deadline, on a client with ContextTimeoutEnabled, runs on the caller's
goroutine and ends at that deadline at the latest; a cancellation before it ends the call no
sooner when the server does not answer. Every other call (a ctx without a deadline, a client
without ContextTimeoutEnabled, OpenSession, or a call a Simba client makes for a caller whose
cancellation may end it before its deadline: spi.CallerCancels, so that a Lock, TryLock or
Unlock returns at its ctx's cancellation) returns as soon as its ctx is done, with ctx's
error, while the go-redis call goes on on a goroutine of its own, holding its connection,
until the reply or the client's read timeout (go-redis's read_timeout, times its retries).
Close ends those at once on a client it owns (Open): it closes the client before it waits for
the hint hub, so it returns promptly even at a server that stopped answering. A client passed to New is left open, and
Close then waits for the hub's read in flight, if any: at most 5 s with ContextTimeoutEnabled,
else the client's read timeout.

# Inspect

Inspect SCANs the lease, session and group keys (on a Cluster, of every master) and reads them
in pipelined batches: it is meant for status tools, not hot paths. InspectLease (what
fence.LeaseVerifier reads per check) reads one lease key in one round trip: TIME, EXISTS and
HMGET pipelined, on a Cluster in one MULTI/EXEC that the client sends to the master of the
key's slot and follows there through MOVED and ASK while the slot migrates.
*/
package redis
