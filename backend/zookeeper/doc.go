/*
Package zookeeper is Simba's ZooKeeper backend: it implements the SPI (spi.Backend, with the
spi.Hinter, spi.Inspector, spi.LeaseInspector, spi.Queuer and spi.SessionQueue capabilities) with
github.com/go-zookeeper/zk on the layout generated from spec/zk.yaml (package wire):

  - A Simba session is a ZooKeeper session, on a connection of its own; its id is the
    ZooKeeper session id as 16 lowercase hex digits. OpenSession asks for the TTL as the
    session timeout, or the TTL less one tick when the DSN gives the servers' tickTime (see
    Session timeout and tickTime); the server clamps it into [minSessionTimeout,
    maxSessionTimeout] and a timeout above the maximum is refused with spi.ErrInvalidOption.
  - A lease is the ephemeral node /simba/leases/<name>; its data is the holder's owner and its
    czxid is the fencing token. ZooKeeper's zxids only grow (and persist across restarts), so
    every new grant of a name carries a greater token, across session expiry and server
    restarts. A re-acquire by the holder returns the same node, so the same token. The token
    cannot be lost as a Redis hash or a SQL row can: a node deleted by hand, or with its
    session, takes no counter with it, as the next node's czxid is a later zxid of the whole
    ensemble. It needs nothing beyond ZooKeeper's own durability (its transaction log; an
    ensemble restored from an old snapshot could repeat zxids). A czxid carries the leader
    epoch in its high 32 bits, so tokens are large numbers, not 1, 2, 3: only their order
    means anything.
  - Group members are ephemeral nodes /simba/groups/<group>/<sid>.
  - Waiters (spi.Queuer) are ephemeral sequential nodes /simba/waiters/<name>/<sid>-<seq>
    under a container queue node per name, which the server deletes once no one waits;
    see Waiter queues.

# Waiter queues

A session that waits for a held lease (AcquireQueued: Lock, a campaign, a candidacy) gets a
waiter node, created with ZooKeeper's sequence number, which orders the queue; it keeps that
node (its place) on later attempts, loses it with its session (the node is ephemeral), and
deletes it when granted or when it stops waiting (Withdraw). A free lease goes only to the
session of the first waiter node, or to anyone while the queue is empty: every other acquire,
queued or plain (TryLock), is HeldBy that first waiter (RemainingUnknown), whose node the
reply's read watches, so that its deletion is a Released hint. A waiter is therefore granted
the lease after at most as many tenures as there were live waiters ahead of it when it
queued; a holder that re-locks in a loop cannot keep it out. A waiter node lives as long as
its session, not one TTL after the waiter's last attempt, so a Withdraw that fails is run
again after the session's next keep-alive (unless the session queues for that name again
first): a waiter that stopped waiting does not keep a free lease reserved while its process
runs. An AcquireQueued of the name waits for such a withdrawal still running (that retry, or
a Withdraw whose caller gave up before its delete was answered), which would otherwise delete
the waiter node it keeps as its place. The backend says so (spi.SessionQueue), so a waiting client does not re-attempt before
its session's deadline as of its previous attempt, as it must where entries lapse (SQL,
Redis): besides the attempt a Released hint wakes, a waiter tries again only two TTLs after its
last HeldBy (whose remaining time is unknown here), in case a hint was lost; see Steady hints.

ZooKeeper's multi-op cannot check a node's children, so every add or remove of a waiter node
writes the queue node (empty) in the same multi-op, bumping its data version, and an acquire
creates the lease node in one multi-op with a check of the queue as it last saw it: while the
name has no queue node, a create and delete of it, which succeed only while it does not exist;
while the queue is empty, a delete of it, which succeeds only while it has no children; when
the session's own waiter node is first, a write of the queue at the version it saw and the
delete of that node. When that check fails, the acquire reads the queue and tries again.
After eight such rounds (the queue kept changing under busy waiters) it gives up with an
error that matches spi.ErrContended (and ErrUnavailable): retried like any retryable failure,
but no outage, so the client logs it at DEBUG, not as a WARN "simba backend error" followed by
"reachable again" a few milliseconds later. A release, an add of a waiter node and a
withdrawal that keep losing such races give up the same way.
Without waiters an acquire thus stays one request (the multi-op's zxid is the new node's
czxid). A child of a queue node that is not an ephemeral node of the session its name gives
is skipped with a warning (and the queue's version checked instead).

A queue node is a ZooKeeper container node (ZooKeeper 3.5.3 and later): the server deletes it
once its last child is gone, on its container check (the server's
znode.container.checkIntervalMs, 60 s by default), so lock names used once each (per entity,
per job) leave no node behind, where they used to keep one per name ever waited for. An
acquire that finds a queue empty deletes it itself. The deletion brings no hint and
no watch (none is set on queue nodes): a waiter's node goes first, and its deletion is the
hint. Since a queue deleted and created again starts its version over, no check relies on the
version of an empty queue: the delete fails while any waiter is in it, and the write of a
queue in which the session's own node is first cannot meet another queue, as the server
deletes no container that has a child. A waiter whose add finds the queue gone creates it
again and adds itself once more; the common path (a queue that exists) takes no extra
request. Queue nodes that clients of earlier releases created are persistent: they keep
working with this client and are deleted by its acquires once empty.

# Steady hints

The backend reports spi.SteadyHints: a Released hint of a name a session waits for is not
lost to a reconnect while the session lives, so a waiting client's fallback retry, should a
hint be lost after all, comes two TTLs after its last HeldBy rather than one. With one TTL, a
crash failover mostly cost a waiter two acquires: the fallback retry, made while the crashed
holder's session had not yet expired (up to a TTL after the crash), and the one the hint
brought; read per TTL of a failover shorter than two thirds of a TTL, that was more than 3
(issue 17's target). Two TTLs after an attempt made less than a TTL before the crash, the
retry comes after the expiry, whose hint has brought the grant: one acquire per failover,
unless the waiter's last attempt was more than a TTL before the crash (a long wait), when the
retry may still fall inside the failover, about half as often as before.

The claim rests on how each kind of watch behaves:

  - The watcher connection's persistent watches (ZooKeeper 3.6+) go with its connection (a
    session of its own, 30 s, not resumed): after each reconnect the watcher sets them again
    and reads each lease node behind its watch (an exists), hinting a node found gone, so a
    release made while it was away is hinted when it is back (within about a TTL of the heal,
    see The protocol tap); while it does not answer, the sessions' own watches speak.
  - A session's own watches (on the node its HeldBy read, the holder's lease node or the first
    waiter's node) are one-shot, set again by each read. go-zookeeper sends them again on each
    reconnect of the session (sendSetWatches, with the session's last zxid; split into packets
    of 128 KiB, below the server's jute.maxbuffer, and sent again on the next reconnect if the
    connection fails first), and the server fires each whose node changed after that zxid. They
    go only with the session (go-zookeeper's invalidateWatches, on its expiry or Close), when
    the waiter's place goes too.
  - A watch that fires for a change that is not a deletion (a NodeDataChanged) is published
    as a hint too: the waiter's acquire that follows sets a new watch.
  - A wait for a name lasts three session timeouts after the session's latest acquire of it
    found it held (plus a second), longer than the client's fallback retry: the watcher
    watches the name, and its hints are published, until then.

A hint is still lost when a subscriber falls behind its channel's buffer (delivery never
blocks the backend), or by a bug; the fallback retry bounds what that costs: up to two TTLs
after the waiter's last attempt, one more than before.

# Nodes Simba did not create

Simba never deletes a node it did not create, and never takes one for its own:

  - A child of a group node is a member only if its name is a ZooKeeper session id and it is
    an ephemeral node of that very session. Anything else (a persistent node, another name, one
    session's node under another's id) is skipped with a warning (WithSlog), so it is never
    assigned partitions that nobody would then lead. A verdict costs one exists per child,
    cached until the group's child watch fires.
  - A node at a lease path that is no session's (persistent) is reported HeldBy ForeignHolder
    with the owner ForeignOwner, with a warning: the name is held until someone deletes the
    node (the acquire's watch then yields the Released hint). Another session's node whose
    data is not an owner string is HeldBy that session with the owner ForeignOwner.
  - An ephemeral node where Simba needs a persistent one (the chroot, /simba, its leases and
    groups nodes, a group node) is a permanent error naming the path: ZooKeeper refuses
    children under an ephemeral node, so retrying cannot help. OpenSession checks the roots.
  - Watches are the hints: Released when a lease node that one of the backend's sessions
    waits for is deleted, GroupChanged when a membership changes (see Backend.Hints).

# Time

A session lives while its keep-alives arrive: the backend drops go-zookeeper's automatic
pings, so a client whose engine stops renewing loses its leases after the session timeout,
as on every other backend. The remaining time a reply reports is the negotiated session
timeout counted from the send time of the last acknowledged renewal (the session's first
request or a keep-alive), measured on Go's monotonic clock; the server, which renews a session
whenever a request of it arrives, never expires it sooner.

# Session timeout and tickTime

ZooKeeper expires sessions in buckets of its tickTime (zoo.cfg; 2 s by default), not at the
millisecond: each request of a session moves the session's expiry to the first multiple of
tickTime after the request's arrival + the session timeout (ExpiryQueue.roundToNextInterval),
and the server's expirer wakes once per tick. A session that asks for its TTL as its timeout,
as ZooKeeper's own recipes and go-zookeeper's zk.Lock do, therefore outlives its last request
by between the TTL and the TTL + one tick: a crashed holder's lease nodes go, and a waiter
takes over, up to one tick later than the TTL (with the default tickTime of 2 s, a TTL of 15 s
can mean 17 s).

Telling the backend the servers' tickTime removes that tick: with the DSN parameter tickTime
(zk://zk1,zk2,zk3/simba?tickTime=2s, or tickTime=2000 in milliseconds as zoo.cfg writes it) or
Config.TickTime, each session asks for a session timeout of TTL − tickTime, which the server
expires within (last request + TTL − tickTime, last request + TTL]. The price is a holder's
own view: the remaining times a session reports (see Time) run on the negotiated timeout, so a
holder's term is a tick shorter between keep-alives, and it never outlives what the server
enforces. Keep-alives (every TTL/3 by default) still land inside the shorter timeout: the
tick must be less than half the TTL, so the timeout is more than half the TTL: a TTL of two
ticks or less is refused with spi.ErrInvalidOption before any I/O, by simba.New (which asks
Backend.CheckTTL, spi.TTLChecker: "zookeeper: tickTime 2s must be less than half the ttl 3s:
lower the DSN's tickTime or raise the TTL ...") and by OpenSession; a tick below
a third of the TTL (ZooKeeper's default 2 s against Simba's default TTL of 15 s) also leaves
room for one lost keep-alive, whose retry two renewal intervals after the last renewal still
comes before TTL − tick.

The value must be the servers' actual tickTime. A smaller one removes only part of the
overshoot; a larger one shortens sessions more than needed (safe, since everything runs on
the negotiated timeout, but a failover then comes sooner than the TTL and keep-alives have less
room). Where the server clamps what is asked:

  - maxSessionTimeout: a TTL whose TTL − tick is above it is refused, as a TTL above it is
    without the option (a TTL of maxSessionTimeout + tick is now accepted).
  - minSessionTimeout (2 × tickTime by default): when TTL − tick is below it (a TTL under three
    ticks with the default), the server grants the minimum; the session opens and is as safe as
    any (its remaining times run on what was granted), but a crashed holder's nodes may go up
    to granted − asked after the TTL, never later than without the option. The backend logs a
    warning (WithSlog) once per TTL and grant.

On an ensemble, a request that reaches a follower renews the session at the leader, which
expires sessions, only when the follower next reports its sessions (the servers' pings, every
half tick), which can still add up to half a tick. Without the option nothing changes: the
session timeout asked for is the TTL.

# Expiry is final

When ZooKeeper expires a session, go-zookeeper opens a new one on the same connection by
itself. The backend never lets that happen: it watches the protocol as it passes (see below),
marks the session gone the moment a reconnect is answered with another session id, and from
then on refuses to dial, so no request of the old session can run under a new one. Every call
on the old session then answers SessionExpired (spi.Acquire with Kind SessionExpired,
spi.KeepAlive with Expired, spi.Expired); the engine opens a new session.

# Closing a session the client gave up on

While a session lives, go-zookeeper reconnects when a connection fails, to the same server
or another member of the ensemble, and the session carries on with its leases and tokens: a
network blip shorter than the engine's deadline costs nothing. Once CloseSession is called
(by the engine, when that deadline has passed without an answered keep-alive and it has
revoked the session's terms), the session is of no more use to anyone: the engine never
resumes a session (a new one is opened). CloseSession then stops go-zookeeper from dialling
again, and makes sure the close request reaches the server: over go-zookeeper's connection if
it is established, or right behind its connect request if that is out and unanswered (the
server reads it once it has moved the session to that connection), else over a connection
of the backend's own, a connect request with the session's id and password followed at once
by the close request. This matters under a one-way partition (the client's bytes reach the
server, the server's do not come back): go-zookeeper gives up on the silent connection (at
the reply timeout, or earlier when a keep-alive finds it silent, see "Outages and
reconnecting") and reconnects; its connect request reaches the server and
renews the session, while its own close request waits for a handshake answer that never
comes, or is dropped when closing stops the reconnect. The lease nodes of terms the client
had already revoked then stayed at the server for up to one more session timeout, or until
the partition healed; now they go when the client gives up. CloseSession returns nil only
once the server has answered the close (or answered that the session had ended already); when
no answer comes (the connection fails first, a server that took the connect request never
answers it within the reply timeout, or the caller's ctx ends) it returns a retryable
unavailable error, having closed the session's connection all the same: the session and its
nodes may still be at the server until it expires them. A retry closes the session over a
connection of the backend's own, until one session timeout after the last attempt, when the
server has surely expired it and a retry returns nil.

# Releases and keep-alives

Acquire is one multi-op: the create and the check of the waiter queue (its reply's zxid is
the new node's czxid). On NodeExists it reads the
node, setting a watch: the session's own node is a Granted re-acquire with its czxid, another
session's is HeldBy with RemainingUnknown, since ZooKeeper cannot tell how long another session
has left; the watch yields the Released hint the engine waits for.

KeepAlive is one cheap request (an exists on the leases node) plus one getChildren per group,
whatever the number of leases held. Which of the asked names the session holds comes from its
own record, kept exact by the facts that a connection carries one session only, that a lease
node is ephemeral, that only the holding session deletes its node (ACLs keep clients without
Simba's identity from deleting any), and that an exists watch on every held node (set 100 ms
after the grant, or at once by the next keep-alive, which waits for it) reports a deletion by
a privileged outsider: ZooKeeper delivers a watch event before the reply to any later request
of the session. Such a lease is then missing from the keep-alive's reply, which the engine
treats as TAKEN_OVER. Names whose acquire had an unknown outcome (a lost reply) are read once
by the next keep-alive that asks about them.

Release deletes only the node of the caller's tenure. ZooKeeper can make a delete
conditional on the data version only, and that is 0 for every node Simba creates, so a bare
delete sent on a stale record deletes whatever node is at the path: after an outsider deleted
the holder's node, before its watch was set, and another session created the name again, the
old holder's release used to delete the new holder's node. So every session adds a digest
identity of its own when it connects (user "simba-session", a random password known to no one
else), its lease nodes grant write to that identity alone (and read to the world), and a
release is one multi-op that writes the node (empty data, at the expected version) and
deletes it at the version that write gives it. ZooKeeper applies a multi-op atomically and
checks the permission of each part: on a node of another session's tenure the write fails
with NoAuth, and nothing is deleted. When the session's record holds the node with the token,
that multi goes out at once; otherwise the backend reads the stat first and sends it only if
the ephemeral owner is this session and the czxid is the token. An acquire+release cycle so
costs one create and one multi, about one raw create+delete pair (see BenchmarkAcquireRelease).
What this does not cover: a node at the path created by a client with a write permission this
session also holds (a Simba client of an earlier 5.x release, whose lease nodes grant all to
the shared DSN identity; a foreign client's node with an open ACL), and ZooKeeper super
users, who bypass ACLs. The release's write fires a NodeDataChanged to watchers of the node;
the backend takes it, on a lease it does not hold, as a Released hint.

The ACL keeps a release off other sessions' nodes, not off the same session's next node of the
name, which is at version 0 too and which the session may write. So a release and an acquire of
one name by one session never cross: ZooKeeper applies a session's requests in the order they
were sent, and the backend sends an acquire's create only once no release of the name by the
session is in flight (from its check that the session holds the node until its multi-op is
written to the session's connection: go-zookeeper writes a connection's requests in order from
one goroutine, so the create goes out behind it, or, should that connection fail first, on a
later one once the multi-op has failed with it; a release that has to read the node first
keeps it until its multi-op is answered), and a release's check only once no acquire's create
of the name is (from before it is sent until its outcome is recorded; the record keeps the
newest token). A late release of an
old token (one retried after its acquire overtook it, or one whose caller gave up and whose
multi-op was still to be sent) therefore finds the next term's node recorded with its own token
and leaves it alone, where it used to delete it while the session held the new token by its
reply. An acquire that would have overtaken its own release waits for the release's multi-op to be
written (it is then granted a new term instead of re-acquiring the old node; one whose create
went first still re-acquires the old node, as before): it used to wait for the multi-op's
answer, a round trip that took same-client churn on one name (BenchmarkLockChurnOvertake) from
a Lock p50 of 1.7-2.0 ms to 2.7-2.9 ms; calls on different names,
or of different sessions, do not wait for each other. A request whose caller gave up before it
was sent is not sent; one in flight when its caller gives up is still waited for by the
session's next call on the name (an acquire's caller waits no longer than its context allows).
Join and Leave do not take part: a member node's path is the session's own, and a late Leave
can still delete the membership of a later Join of the group (a membership, unlike a lease, is
not exclusive and has no token).

# Security

With a user:password in the DSN every session adds it as a ZooKeeper digest identity and every
node gets the ACL creator-all (scheme "auth") plus world-read (wire.ZKACLIntent): clients
without that identity can look but cannot delete, change or create Simba's nodes. Without
credentials the nodes are open (world-all; lease nodes world-read, with write for their own
session only) and nothing protects them from deletion by other clients; the backend then logs
a warning, saying to put a user:password in the DSN, through the logger given with WithSlog
(once per logger; slog.Default(), once per process, when none is given) at its first
OpenSession, before it creates any node: a backend that only reads (Inspect, as simba status
does) creates none and does not warn. The DSN's acl=open (Config.OpenACL) says the open ACL is
intended (a private ensemble, a test) and moves that warning to the debug level, so that a
process started again and again (simba lock from cron, every minute) does not log it each time;
it changes no ACL, and beside a user:password it is refused.

What digest auth does and does not protect:

  - The credential crosses the network in clear text: every connection sends "user:password"
    in its auth request (again after each reconnect), and the server keeps only
    user:base64(sha1(user:password)) in the ACLs, which anyone may read. Without TLS, anyone
    who can read the traffic can take the credential and then act as Simba. Use TLS (below).
  - ACLs tell identities apart, not clients: every client that holds the credential, every
    Simba process and any tool or operator configured with it, may delete, change or create
    any of Simba's nodes (lease nodes: delete only). Simba's own code deletes only nodes its
    session holds; a deletion by another holder of the credential takes a lease from its
    holder (who sees it as taken over). Give the credential to Simba's processes only.
  - World-read is deliberate (status tools, operators): owner strings and group memberships
    are public to every client of the ensemble. Do not put secrets in owner strings.
  - It does not authenticate the server, nor encrypt anything: only TLS with certificate
    verification does.
  - Lease nodes grant write to the creating session's own identity only (see Releases): not
    even a client with the DSN's credentials can write them, though it can delete them (the
    delete permission is the leases node's).
  - Nodes keep the identity that created them: changing the password (or the user) locks the
    backend out of the persistent nodes created before (/simba, its leases and groups nodes,
    group nodes): OpenSession, Acquire and Join then fail with a permanent error naming the
    root, until an administrator changes the ACLs or deletes those nodes.
  - What matches spi.ErrAccessDenied (simba.ErrAccessDenied), permanent: a request a node's ACL
    refuses (NoAuth: a wrong digest password, which ZooKeeper itself accepts, no credentials
    where the nodes or the chroot need some, or another identity's nodes), saying "privilege
    refused", the user and the servers; and credentials the servers refuse (AuthFailed, as
    with SASL), saying "authentication refused". Both match the zk package's error too.
  - A ZooKeeper super user (superDigest), a server run with skipACL, and anyone with access
    to the servers' data directories bypass ACLs altogether.

# TLS

The DSN scheme zk+tls (with ca, cert, key and servername parameters, see ParseDSN), Config.TLS
or the option WithTLS make every connection TLS: the servers' secure client port
(secureClientPort, with serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory).
WithDialer replaces the transport under it (proxies, tunnels). A server certificate that does
not verify, a peer that does not speak TLS in the handshake, or a server that refuses the
handshake (ZooKeeper's default ssl.clientAuth=need refuses a client without a certificate its
trust store accepts) is a permanent error of OpenSession, returned at once. An EOF in the
handshake is told apart by a plain-text ZooKeeper connect request on a new connection: a plain
client port answers it (the session it opens lasts the server's minSessionTimeout), and the
error is then a permanent TLS failure (spi.ErrTLS) saying to use zk:// or the secure port; a
server over its connection limit, which closes connections the same way, answers neither, and
the error stays retryable, naming the last connection attempt's failure.

# Outages and reconnecting

OpenSession fails at once, with the last attempt's error (retryable), when an attempt at each
server has failed and none has answered a connect request: the dial failed (an ensemble that is
down, a wrong port), or the server closed the connection before any byte of its connect response
(a server out of its quorum or over its connection limit, or a proxy or load balancer in front
of a server that is down, "<addr> closed the connection before answering the connect request"),
instead of waiting until the call's deadline (10 s, Config.Timeout, for a context without one:
simba status took that long at a proxy whose server was down): a client hears of it at its
first attempt, and retries with its backoff. A server that takes the connection and never
answers is still waited for, up to the attempt's bound.

A session lives through an outage of its servers (a restart, connections reset and new ones
refused) if its connection is back in time to renew it before its deadline, the session
timeout less 1% and 50 ms after its last renewal was sent: with the engine's defaults (a
renewal every TTL/3), at least 0.657 × TTL − 0.05 s after the outage began. go-zookeeper's
connection waits one second before each round of its servers, the first round after a lost
connection included (with a single server, before every dial): it reached a server that
refused connections for 1.5 s only 2 s after the outage began, and a session of TTL 3 s was
lost whenever its last renewal was more than about 0.9 s old. The backend's connections
therefore use a host provider of their own: go-zookeeper's server
list and order, but a lost connection is redialled after 25-50 ms, and each failed round is
followed by a wait twice as long, up to a twelfth of the session timeout (250 ms at 3 s, at
most go-zookeeper's second), until the outage has lasted one session timeout, after which the
session has expired at the server and go-zookeeper's own pace (one second per round) resumes;
so does a round that took a second or more (hung dials or handshakes).
Requests queued meanwhile wait for the connection (or their caller's context) instead of
failing at the end of each round. A session thus rides out an outage of up to about
0.657 × TTL − 0.05 s − min(TTL/12, 1 s) (less a few round trips): 1.7 s at TTL 3 s, 8.8 s at
15 s, 0.5 s at 1 s, more than TTL/2 at any TTL of 2 s or more, with one server or with an
ensemble lost whole
(TestSessionRidesOutShortOutage, TestEnsembleSessionRidesOutShortOutage); an ensemble member
lost alone is replaced by the next at once, as before. A Connector's connection keeps the host
provider its caller gives it (go-zookeeper's by default, and its pace).

A longer outage of a server that restarts (a standalone server killed and started again, a
whole ensemble restarted) no longer costs one more TTL after it is back. The client has lost
its session (its deadline passed) and opens a new one at once, but the restarted server
reloads the old sessions from its snapshot and log and would expire them only one session
timeout after it starts, their ephemeral lease nodes keeping every name they held from the new
sessions' acquires: 9.8 s at TTL 10 s after a 40 s kill (trial 25; a server stopped with
SIGSTOP instead expires them as soon as it runs again). The client closed the lost session at
its deadline, which failed with the server down, and closes it once more as soon as its next
session opens (the engine's retry of a lost session's close): the backend keeps each unclosed
session's id and password until a server has answered it again for one session timeout, not
merely one session timeout after the failed attempt, so that retry reconnects to the reloaded
session with its credentials and closes it, and its nodes go at once
(TestLostSessionClosedAfterRestart). Only a session's own id and 128-bit password can close
it, and a server that has expired the session already answers without it: the retry then
returns nil. Sessions of clients that did not live through the outage (killed with it) still
expire one session timeout after the server starts.

A silent outage (the open connection goes silent for good, with no bytes, close or reset
either way, as in a failover, a lost NAT entry or a partition, and new connections are taken
and never answered until it ends) used to lose the session every time, even for 300 ms: the
backend drops go-zookeeper's pings, so the connection was given up only at the reply timeout
(2/3 of the session timeout after the keep-alive's request), and the keep-alive's retries
queued behind it on the same connection, while the server expires the session a session
timeout after the renewal before, a renewal interval earlier (the engine's deadline passed
first). Now a keep-alive that timed out (TTL/3 after it was sent, with the engine's defaults)
closes the connection if it has read nothing for at least half that time since it last wrote:
the engine retries the keep-alive (within 50 ms) and go-zookeeper redials at the pacer's pace
(25-50 ms after a connection that lasted), each attempt into the void given up as below; the
retry goes out on the fresh connection with a third of the session's time (less 1% and 50 ms)
left. The connection is not given up sooner, while the keep-alive may still be answered in
time: a link that only stalls (a server or client busy for a few hundred milliseconds)
delivers the reply once the stall ends, and a fresh connection would be stalled as well.
Given up halfway to the keep-alive's deadline (TTL/6 after it was sent, as before), a client
at TTL 1 s reconnected 10 times a minute through stalls of 100-400 ms both ways every 1-3 s,
each time failing the requests in flight (a keep-alive, a release of unknown outcome), and any
stall of more than TTL/6 across a keep-alive cost a reconnect (TestSessionRidesOutStalls).
Safety does not depend on it: the session's local deadline (the TTL less 1% and 50 ms after
the last renewal was sent) comes before the server can expire the session, however late a
silent connection is given up; the limit only bounds how soon a dead one is replaced. A
session thus rides out a silent outage that ends with at least a renewal interval (TTL/3) of
its time left,
so any one of up to about TTL/3 − 0.01 × TTL − 0.05 s whenever it begins (0.92 s at TTL 3 s)
and longer ones that begin soon after a renewal (TestSessionRidesOutShortOutage: 1.2 s from
0.65 s after a renewal and 0.3 s just before the next at TTL 3 s, 2.4 s from 1.3 s at 6 s).
Other requests wait for the reply timeout as before, and so does a keep-alive given no
deadline.

A connection attempt into the void (a server behind a partition, whose SYNs are dropped, or
one that takes connections and never answers) used to hold the session for go-zookeeper's
connect timeout (1 s, a dropped SYN) or Config.Timeout (10 s, an unanswered session
handshake), so with several servers in the connection string a blackholed one ahead of a live
one cost a session of TTL 3 s its life on each reconnect. An attempt, dial, TLS and session
handshake together, is now given up after the session timeout / 6 (500 ms at 3 s, the timeout
asked for until the server negotiates one), at least 100 ms, at most Config.Timeout, and the
next server is dialled: a session that has a renewal interval (TTL/3) left when its connection
is lost still has half of it after one swallowed attempt, for the pacer's wait (at most
TTL/12), the next server's handshake and the keep-alive. A session thus opens within its TTL,
and rides out the outages above, with one blackholed server ahead of a live one
(TestOpenSessionPastBlackholedServer, TestSessionRidesOutOutagePastBlackholedServer); two
blackholed servers ahead of the live one take twice as long. 100 ms is ample for a handshake
within a region; a network too slow for the bound still connects, as the bound doubles after
each round of the servers whose attempts were all given up (any other outcome, a refused
dial included, starts the count over). A given-up attempt is one more dial only when the
previous went unanswered, and the pacer still paces the rounds: no more dials than before.

# The protocol tap

go-zookeeper does not expose the negotiated session timeout or the zxid of a create, and
cannot be stopped from replacing an expired session or from pinging. Each session's
connection is therefore dialled through a tap that reads the ZooKeeper protocol as it passes
(connect responses, reply headers) and drops only pings and, when the backend is closed, the
close-session request. It also closes the connection of a reconnect that the server answers
with "session expired", which go-zookeeper neither uses nor closes: left to the garbage
collector, each expiry of a long-running program's sessions held a descriptor in CLOSE-WAIT. For the same reason the backend cannot take an arbitrary *zk.Conn:
NewFromConnector lets the caller make each session's connection with its own go-zookeeper
options, through the tap's dialer and event callback (see Connector for what the backend needs
of the connection and does with it).

Hints come from one extra connection per backend (while Hints has subscribers and its
sessions wait for a lease or use groups) that speaks the few requests go-zookeeper lacks
itself: a persistent watch (ZooKeeper 3.6+ addWatch) on each lease node a session of the
backend waits for (from a HeldBy reply until a grant, a withdrawal, a release, the session's
end, or three session timeouts without another acquire of the name), and on each group node a session of
the backend is a member of, has a Join of in flight, or read the members of (a keep-alive, a
Members) within two TTLs (a member is a child of its group's node: a persistent watch on the
node hears its joins and leaves); each removed with removeWatches when the wait or interest
ends and set again after a reconnect. A group's watch is checked like a lease's: an exists
behind it reads the group node's cversion, and one past what a read of the members found
(since the group's last hint) is hinted, so a change between that read and the watch, or
while the connection was down, is not lost. It used to keep a persistent recursive watch on
the groups node once a session joined or read any group, so every join and leave of every
group, by any client, went to every such backend. It also used to keep a
recursive watch on the leases node, so every lease node's create and delete, by any client, was
sent to every subscribed backend: 8 idle clients made another client's acquire+release cost
1.49 raw create+delete pairs instead of 1.13 (BenchmarkAcquireReleaseIdleHinted). While it is
up and answering, the sessions' own watches on a lease are muted once its watch there is set
and an exists behind it answered (a release in between is then either heard or found), and
on a group once its watch there is checked; a Released hint of a name no session waits for is
not published. It pings every sixth of the shortest TTL the backend's sessions asked for (a third of
its own 30 s session timeout before the first session) and gives the connection up when it has
read nothing for an interval and a reply's allowance, two intervals but at least 500 ms (see
internal/minttl: at TTL 1 s a ping allowed 333 ms made the watcher reconnect 9-11 times a
minute through stalls of 100-400 ms, none now); the sessions' watches speak again as soon as
no reply came for 1.5 intervals. A silent outage (a blackhole) used to keep the dead connection until its read
timeout, 20 s, with the sessions' watches muted: every release then went unheard and each
hand-over to this backend's waiters waited for their one-TTL retry (at TTL 1 s, three
contending clients through blackholes of 0.3-3 s made 208 grants in 2 min and a waiter's Lock
of 10 s failed while the lock was free; now 496 grants, none failed, TestHintsAfterSilentOutage).
A connection dialled during the outage may be swallowed too (taken and never answered, and
silent after the heal): its dial and handshake are given up like a session's (a sixth of the
shortest TTL, doubled after each round of attempts given up) but after at most that TTL, and
the wait between attempts is at most a probe interval, so hints come back within about a TTL
of the heal; such an attempt used to wait Config.Timeout (10 s) for its connect response, and
hints came back 7.8 s after a 3 s blackhole healed at TTL 1 s (TestHintsAfterBlackholedRedial:
0.4 s now).

# Closing the backend

Backend.Close drops the connections of the sessions the client opened without closing the
sessions: like a crashed client's, they expire at the server after their timeout, and only
then free their leases, since a process that merely lost its backend must not let another
take over while it may still be working (CloseSession, which the client's Close calls first,
is what closes a session at once). Nothing reaches the server from a dropped connection,
the close request least of all: the backend closes the connection once go-zookeeper's
Conn.Close has handed it that request, so go-zookeeper's goroutines end at once. Closed
earlier, go-zookeeper's connection loop could end before the request was queued, and its
Conn.Close then waited out its one-second timer: a backend's Close took 1.0 s now and then
(1-5 in 40 with one session open).

The observer session (the backend's own, for Members and Inspect when no session is open)
holds nothing, and is closed at the server when its connection is established: Close returns
about a round trip later, and the server has dropped the session and its watches by then
instead of one session timeout later. A server that does not answer that close within half a
second is taken for gone and the connection dropped.

Close returns once every goroutine the backend started has ended (a goroutine-leak check
right after it finds none): go-zookeeper's of every connection of the backend, the workers
that run requests for calls with a deadline (a request under way fails once its connection is
dropped), and those of sessions still connecting when Close came (an OpenSession, or the
observer a Members opens, at a server that has not answered the handshake yet), which Close
drops like the others, their callers' calls then failing at once with spi.ErrBackendClosed
instead of at their deadline while their connections ran on. A connection that Close finds
broken, unanswered or reconnecting (to a server that is down) is handed, when go-zookeeper
dials again, a local stand-in that answers its handshake and ends on its close request, and
go-zookeeper's Conn.Close is called only then: called earlier, its connection loop could end
between two rounds of dials without taking the close request, and Conn.Close waited out its
one-second timer (Close took 1.0 s for 7 of 80 sessions closed while connecting to a stalled
or blackholed server, none now). Close waits 3 s at most. CloseSession closes still running
over connections of the backend's own are stopped and waited for. A dial still hanging when
Close comes (a server that drops the SYN) is cut short: the hint connection's, which Close
waits for and whose dial was given up only at its bound (a sixth of the shortest TTL, up to
Config.Timeout: 10 s for a TTL of 60 s, where Close is bounded at 3 s), and a session's (one
still connecting, or reconnecting), which go-zookeeper's connect timeout bounds at 1 s. A
dialer given with WithDialer takes no context: its dial runs to its own end.

# DSN

	zk://[user:password@]host1[:port][,host2[:port]...][/chroot][?timeout=10s&tickTime=2s]
	zk+tls://[user:password@]host1:securePort[,...][/chroot][?ca=…&cert=…&key=…&servername=…&tickTime=2s]

See ParseDSN; tickTime is the servers' tickTime (see Session timeout and tickTime). Close drops the connections without closing the sessions (a crashed client's
sessions expire after their timeout: see Closing the backend); CloseSession closes one
session at once, deleting its nodes.
*/
package zookeeper
