/*
Package zookeeper is Simba's ZooKeeper backend: it implements the SPI (spi.Backend, with the
spi.Hinter and spi.Inspector capabilities) with github.com/go-zookeeper/zk on the layout
generated from spec/zk.yaml (package wire; DESIGN.md §5):

  - A Simba session is a ZooKeeper session, on a connection of its own; its id is the
    ZooKeeper session id as 16 lowercase hex digits. OpenSession asks for the TTL as the
    session timeout; the server clamps it into [minSessionTimeout, maxSessionTimeout] and a
    TTL above the maximum is refused with spi.ErrInvalidOption.
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
  - Watches are the hints: Released when a lease node is deleted, GroupChanged when a
    membership changes (see Backend.Hints).

# Time

A session lives while its keep-alives arrive: the backend drops go-zookeeper's automatic
pings, so a client whose engine stops renewing loses its leases after the session timeout,
as on every other backend. The remaining time a reply reports is the negotiated session
timeout counted from the send time of the last acknowledged renewal (the session's first
request or a keep-alive), measured on Go's monotonic clock; the server, which renews a session
whenever a request of it arrives, never expires it sooner.

# Expiry is final

When ZooKeeper expires a session, go-zookeeper opens a new one on the same connection by
itself. The backend never lets that happen: it watches the protocol as it passes (see below),
marks the session gone the moment a reconnect is answered with another session id, and from
then on refuses to dial, so no request of the old session can run under a new one. Every call
on the old session then answers SessionExpired (spi.Acquire with Kind SessionExpired,
spi.KeepAlive with Expired, spi.Expired); the engine opens a new session.

# Releases and keep-alives

Acquire is one create (its reply's zxid is the new node's czxid). On NodeExists it reads the
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

Release deletes the node only if it is this session's with the term's czxid. When the
session's record holds the node with that czxid, that record stands in for reading the stat
(it is as fresh as a read, by the argument above) and the delete is sent with the node's
version at once; otherwise the backend reads the stat and deletes with its version only if the
ephemeral owner is this session and the czxid is the token. An acquire+release cycle so costs
about one raw create+delete pair (see BenchmarkAcquireRelease).

# Security

With a user:password in the DSN every session adds it as a ZooKeeper digest identity and every
node gets the ACL creator-all (scheme "auth") plus world-read (wire.ZKACLIntent): clients
without that identity can look but cannot delete, change or create Simba's nodes. Without
credentials the nodes are open (world-all) and nothing protects them from other clients; the
backend then logs a warning (log/slog) once per process.

# The protocol tap

go-zookeeper does not expose the negotiated session timeout or the zxid of a create, and
cannot be stopped from replacing an expired session or from pinging. Each session's
connection is therefore dialled through a tap that reads the ZooKeeper protocol as it passes
(connect responses, reply headers) and drops only pings and, when the backend is closed, the
close-session request. For the same reason there is no constructor taking a caller's *zk.Conn.
Hints come from one extra connection per backend (while Hints has subscribers) that speaks
the few requests go-zookeeper lacks itself: a persistent recursive watch (ZooKeeper 3.6+) on
the leases and groups nodes.

# DSN

	zk://[user:password@]host1[:port][,host2[:port]...][/chroot][?timeout=10s]

See ParseDSN. Close drops the connections without closing the sessions (a crashed client's
sessions expire after their timeout); CloseSession closes one session at once, deleting its
nodes.
*/
package zookeeper
