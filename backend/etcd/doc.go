/*
Package etcd is Simba's etcd backend: it implements the SPI (spi.Backend, with the spi.Hinter,
spi.Inspector, spi.LeaseInspector, spi.Queuer and spi.SessionQueue capabilities) with go.etcd.io/etcd/client/v3 on
the key layout and the transactions generated from spec/etcd.yaml (package wire for the keys,
package etcdtxn for the transactions):

  - A Simba session is an etcd lease; its id is the lease id as 16 lowercase hex digits, and
    the key <prefix>/sessions/<sid> (value: the owner) is attached to it. etcd counts lease
    TTLs in whole seconds: OpenSession asks for the TTL rounded down to a second (a TTL under
    one second is refused with spi.ErrInvalidOption) and reports that as the time left. A
    server raises a TTL below its minimum lease TTL (1.5 election timeouts rounded up to a
    second: 2 s with etcd's defaults); the session is as safe as any (its time left counts
    on the TTL asked), but a crashed holder's leases go only when the longer lease does, and
    the backend logs a warning (WithSlog) once per asked and granted TTL.
  - Keep-alive is one LeaseKeepAliveOnce for the session's lease, whatever the number of names
    it holds, then one read-only transaction that reports the session's held leases (the index
    <prefix>/held/<sid>/, checked against the lease key of each name asked about: see Keys
    Simba did not write) and each requested group's members (a write only when it deletes
    stale index entries, there).
  - A lease is the key <prefix>/leases/<name>, attached to the holder's etcd lease; its value
    is the holder's owner and its create revision the fencing token. Acquire, Release, Join
    and Leave are one etcd transaction each, guarded by compares on create revisions and on
    the lease a key is attached to (see spec/etcd.yaml for their exact shape); acquire also
    compares that no one waits for the name (see Waiter queues).
  - Tokens are etcd revisions: the store-wide revision only grows and is never issued twice,
    and a new tenure creates the lease key afresh, so each tenure's token is greater than every
    earlier one of that name, across holders, expiries, leader changes and restarts, and
    compaction does not touch it (spec/etcd.yaml explains why a per-name counter key was not
    chosen). Restoring an older snapshot rewinds revisions: restore with `etcdutl snapshot
    restore --bump-revision <n> --mark-compacted`.
  - When a session's lease expires or is revoked, etcd deletes every key attached to it in one
    revision: the session key, its leases, its waiter keys and its memberships. Hints come
    from watches of the lease key and the waiter keys of each name a session of the backend
    waits for (a deletion is a Released hint; see Backend.Hints) and of the member keys of
    each group a session of the backend is a member of or read the members of lately (a change
    is a GroupChanged hint).
  - A lease held by another session is reported HeldBy with its time left unknown: etcd's
    LeaseTimeToLive only counts whole seconds, and the watch tells waiters the moment the
    holder's keys go. etcd revokes expired leases on a timer of its own (every 500 ms), so a
    crashed holder's lease is freed up to that much after its TTL.

# Waiter queues

A session that waits for a held lease (AcquireQueued: Lock, a campaign, a candidacy) puts the
key <prefix>/waiters/<name>/<sid> (value: its owner) on its session's lease, as etcd's
concurrency.Mutex queues: the queue is ordered by the waiter keys' create revisions. A put
of an existing waiter key (a session that registers again, e.g. from another Backend that does
not remember its place) keeps its create revision, so a waiter keeps its place; the
key goes when the waiter is granted (in the grant's transaction), when it stops waiting
(Withdraw) or with its session's lease, in the revision that deletes the session's other keys.
A free lease goes only to the oldest waiter, or to anyone while the name has no waiter key:

  - Acquire's transaction compares "no key under <prefix>/waiters/<name>/" (etcd compares a
    range key by key, and an empty range as a zero KeyValue, so "create revision = 0" holds
    exactly when the range is empty). With no one waiting this is the only cost of the queue:
    the uncontended acquire stays one transaction, with one more compare over an empty range.
    When the lease is free but reserved, the reply is HeldBy its oldest waiter, with the time
    left unknown; when the caller is that waiter, it takes the lease (TryLock too).
  - AcquireQueued's first attempt runs acquire_queued: Acquire's transaction whose else
    branch is the enqueue transaction, nested (etcd >= 3.3): a session that does not hold the
    lease puts its waiter key and reads, in the same revision, the key's create revision (its
    place, which the backend remembers per session and name), the lease and the oldest waiter.
    Every later attempt, the one after a wake-up included, is one take transaction: the lease
    is put if the caller's waiter key still has that revision and no waiter key is older
    ("every key under the queue prefix has a create revision >= mine"), and the caller's
    waiter key is deleted in the same transaction; otherwise its reads answer HeldBy. A queued
    acquire is thus one transaction, whether it takes a free lease, registers behind a held one
    or re-attempts (a second, take, only when the lease is free and the caller turns out to
    be the oldest waiter already); TestQueuedAcquireRoundTrips counts them.
  - Wake-ups: a released lease is a Released hint from the watch of its lease key; a deleted
    waiter key (a grant, a withdrawal, a waiter's session ending) is a Released hint for its
    name from a watch on <prefix>/waiters/<name>/, so the next waiter learns at once that it
    is now the oldest. A grant to a waiter thus also wakes the waiters behind it, for one take
    each. A backend watches only the names its sessions wait for, from the reply that found
    the name held on (see Backend.Hints): other names' releases cost its client nothing.
  - A waiter key lives as long as its session (the session's keep-alive keeps it), not just
    until one TTL after the waiter's last attempt: a withdrawal that fails is therefore run
    again by the session's next KeepAlive, so that a waiter that stopped waiting does not hold
    a free lease back while its client lives; an AcquireQueued of the name waits for such a
    withdrawal still running (or a Withdraw whose caller gave up), which would otherwise
    delete the waiter key it makes and cost the waiter its place. The backend says so (spi.SessionQueue), so a
    waiting client does not re-attempt before its session's deadline as of its previous
    attempt, as it must where entries lapse (SQL, Redis): besides the take a Released hint
    wakes, a waiter tries again only two TTLs after its last HeldBy (whose remaining time is
    unknown here): the backend reports spi.SteadyHints, since a name's watches resume after
    the last revision they reported whenever they end (a lost leader, a member cut off), and
    hint the name at once if that revision was compacted; a session's wait for a name (the
    watches) lasts three TTLs after its latest acquire of it. With a fallback retry one TTL
    after the HeldBy, a crash failover often cost a waiter that retry as well as the acquire
    the expiry's hint brought (see the ZooKeeper backend's Steady hints).

A waiter is granted the lease after at most as many tenures as there were live waiters ahead
of it when it registered. A client of an earlier 5.x version, which does not know the waiter
keys, takes a free lease without looking at the queue: mixing versions costs the ordering
guarantee, never the lease's exclusion or the tokens' order.

# Authentication

With etcd's authentication on, the DSN's user:password (etcd://user:password@host/prefix) logs
in, and the user needs a role with readwrite on the key prefix (etcdctl role grant-permission
--prefix=true ROLE readwrite PREFIX). Refused credentials (a wrong password, an unknown user,
none given, a token the server no longer takes: "authentication refused") and a refused
permission (etcd's permission denied: "privilege refused") fail with a permanent error
matching spi.ErrAccessDenied (simba.ErrAccessDenied) that names the user, the endpoints and
what to do, and never the password. A backend made by New or NewFromConfig logs in as its first
call makes its client (waiting for a connection up to the dial timeout); each call waits for
that within its own context, and Close ends it.

With etcd's authentication off, etcd's client drops the DSN's credentials without a word (a
wrong password works, and any client that reaches the server can write Simba's keys): such a
backend asks the server once, as it makes its client, and warns once that the credentials are
not checked. A server before 3.5 cannot be asked (no AuthStatus), and nothing is said.

# Keys Simba did not write

Simba's keys are meant to be written by Simba only (with etcd's authentication, give other users
no write access to the prefix). A key at a lease path that is attached to no lease (a Put by
hand) holds that name for good: it is reported HeldBy the session id 0000000000000000 until
someone deletes it, with a warning naming the key. A key under <prefix>/waiters/<name>/ that
is not on the etcd lease of the session its name gives (a Put by hand, on no lease or on
another) would hold the name's free lease back for as long as it stays (a compare cannot skip
it): the acquire that finds it the oldest waiter deletes it (if it is still on that etcd
lease), with a warning naming the key, and runs again. A key's value that is not an owner
string is never shown as an owner: a HeldBy naming such a key says ForeignOwner.

A held lease is held only while its key stays attached to the holder's etcd lease. Each
keep-alive reads, in its one read-only transaction, the lease key of every name the client
asks about (whole keys with their values, not keys only: etcd 3.7 answers a keys-only read from
its in-memory index, without the key's lease; a client asking about more names than fit etcd's limit on a
transaction's operations, 128 by default, less one per group read, reads instead the lease keys
from the least of those names to the greatest, in one range). A held lease whose key was deleted by hand, or put again on another etcd
lease (etcdctl put --lease=<other>, even with the same value), is reported as no longer held,
so the client revokes the term (taken over) before anyone else can be granted the name: the
name is free once the key is gone (at once after a deletion; when the other etcd lease ends
after a move). One put again on no lease is reported corrupt (the client revokes the term as
corrupt-record), and the name stays held by nobody until someone deletes the key. Each such
key is logged once, as a warning naming it. The session's held index entry for such a name is
deleted by its next keep-alive, in the keep-alive's transaction (a drop_held transaction nested
in it, compared on the entry's token and on the lease key not being on the session's lease:
the report is then a write, with no round trip more), so that another backend adopting the
session does not list the name again (it was hidden in the memory of the backend that found it
only). Before, keep-alive trusted the held index
(<prefix>/held/<sid>/, still on the session's lease), and the holder kept its term while a
second session could be granted the name.

# Outages

OpenSession and Inspect on the backend's own client fail at once, with the dial's error
(retryable), when no member can be reached (a dial to every endpoint refused or failed, or
its connection ended by the member before a byte of answer, and no connection open), instead
of waiting for a connection until the call's deadline as etcd's client does: a client at a
cluster that is down hears of it at its first attempt (simba lock printed its first
"retrying" line after the call timeout, 5 s), and retries with its backoff. An etcd+tls://
DSN at a member that serves plain text (which ends the connection on the TLS handshake) is
told apart by a plain-text GET /version the member answers: the calls fail with a permanent
TLS failure (spi.ErrTLS) saying to use etcd://, where they timed out as unavailable for as
long as the client ran (and simba status, whose Inspect has no deadline, hung).

A session lives through an outage of its server if the client is back in time to renew it
before its deadline, the TTL less 1% and 50 ms after its last renewal was sent; with the
engine's defaults (a renewal every TTL/3, each call bounded by TTL/3) the backend's own client
(New, NewFromConfig) keeps a session through any outage that ends with at least one renewal
interval (TTL/3) of that time left, whether connections are refused or reset (an etcd
restart, a proxy failing over) or go silent (packets dropped with no reset: a partition, a
load balancer's failover), at TTL 1 s as at 15 s (TestSessionRidesOutShortOutage: TTL 3,
2 and 1 s, both kinds). What it takes, since gRPC alone notices neither kind in time:

  - Refused: gRPC redials a lost connection at once and, while dials fail, after
    ReconnectBaseDelay growing 1.6-fold up to ReconnectMaxDelay (±20%): once the server is
    back it is reconnected within 300 ms, and a keep-alive waiting for the connection goes
    out then. gRPC's default (1 s growing to 2 minutes) reached a server that refused
    connections for 1.5 s only 2.6 s after the outage began. The backoff is one per client,
    whatever the sessions' TTLs: 300 ms fits within the renewal interval left at TTL 1 s
    (333 ms), just, and the engine's keep-alive, waiting for the connection or retried within
    50 ms, goes out with it. At TTL 1 s that leaves the keep-alive itself 33 ms when exactly
    TTL/3 is left: a busy client (a loaded machine, the race detector) can miss it, and the
    test's outages leave 390 ms (90 ms for the keep-alive); from TTL 2 s on, the margin is
    the renewal interval less 300 ms, 367 ms and more.
  - Silent: gRPC takes a connection whose packets vanish for a live one until a keep-alive
    ping fails, at least 12 s (gRPC raises any ping interval under 10 s to 10 s), and every
    keep-alive goes on it meanwhile: every such outage lost the session, at any TTL up to
    about 12 s. A session keep-alive or grant that timed out (TTL/3 after it was sent, with
    the engine's defaults) now closes each connection that has waited for a byte since it
    wrote for at least half that call's time (not those whose member answered); gRPC redials
    it at once and the engine's retry of the keep-alive (within 50 ms) goes out on the new
    connection: a session is renewed about 2/3 of a TTL after its previous renewal, with a
    third of its time (less 1% and 50 ms) left, or at the next try once the outage is over.
    The connection is not closed earlier, while the keep-alive may still be answered in
    time: a link that only stalls (a server or client busy for a few hundred milliseconds)
    delivers the reply once the stall ends, and a fresh connection would be stalled as well.
    Closed halfway to the keep-alive's deadline (TTL/6 after it was sent, as before), a
    client at TTL 1 s reconnected 5 times a minute through stalls of 100-400 ms both ways
    every 1-3 s, and any stall of more than TTL/6 across a keep-alive cost a reconnect and
    the calls in flight (TestSessionRidesOutStalls). Safety does not depend on it: the
    session's local deadline (the TTL less 1% and 50 ms after the last renewal was sent)
    comes before the server can expire the lease, however late a silent connection is given
    up; the limit only bounds how soon a dead connection is replaced.
  - A connection attempt into the void (a dropped SYN, a member that takes connections and
    never answers) used to last the dial timeout (Config.DialTimeout, gRPC's
    MinConnectTimeout: 5 s by default). The backend's dialer gives an attempt that has read
    nothing up after the shortest TTL asked of the backend / 6, at least 100 ms, at most
    the dial timeout (before any session, the dial timeout): an attempt made just before the
    outage ended costs a session at most half the renewal interval left to it. A bound that
    the network is too slow for doubles after each round of the endpoints whose attempts were
    all given up, so a client still connects, a few attempts later, up to a third of the TTL
    (the call timeout: an attempt slower than that is of no use to a session call). Doubled
    up to the dial timeout, the attempts an outage swallowed left one pending at the heal for
    seconds: a session lost to a blackhole was reopened 2.5 s after it ended at TTL 3 s,
    1.1 s at TTL 1 s (now 1.0 s and 0.4 s, with the client's probe; see "After an outage" in
    the README).

None of this makes reconnect storms: while a server is down, each client dials each endpoint
at most every ReconnectMaxDelay ±20% by gRPC's backoff (a per-TTL backoff would need gRPC's
ResetConnectBackoff, which races with gRPC's own subchannel updates in the version used); a
connection is closed as silent only when a session call timed out with no byte on it for half
the call's time, so at most once per keep-alive; and an attempt given up at its bound is one more dial only when the
previous one went unanswered. A client passed to
NewFromClient keeps its own gRPC settings and gets none of this (pass grpc.WithConnectParams
in clientv3.Config.DialOptions for the backoff; a silent connection waits for gRPC's
keep-alive ping).

# Server versions

The backend needs etcd 3.3 or later (nested transactions). Its tests run against two servers:
Debian's etcd 3.4 (SIMBA_TEST_ETCD, 127.0.0.1:2379) in `go test ./...`, and a current etcd,
v3.7.3 (the version bench/ embeds; SIMBA_TEST_ETCD_CURRENT, 127.0.0.1:2479, which
.ci/services.sh builds from the Go module proxy), in `make test-etcd-current`, which `make test`
runs: every test of this package, the TCK suites, the outage tests and the private members of
the authentication and leader-loss tests included. Servers differ where the API leaves room: a
keys-only read carries the key's lease on 3.4 but not on 3.7, which serves it from its in-memory
index (see Keys Simba did not write), and keep-alives that read the lease keys keys-only
revoked every held lease as corrupt on 3.7 only.

Open a backend with New (a DSN, see ParseDSN), NewFromConfig, or NewFromClient (a
*clientv3.Client you own). Tokens and sessions live in etcd; nothing is kept by the client
but, per session, when its lease was last renewed.
*/
package etcd
