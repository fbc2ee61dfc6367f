/*
Package etcd is Simba's etcd backend: it implements the SPI (spi.Backend, with the spi.Hinter
and spi.Inspector capabilities) with go.etcd.io/etcd/client/v3 on the key layout and the
transactions generated from spec/etcd.yaml (package wire for the keys, package etcdtxn for the
transactions):

  - A Simba session is an etcd lease; its id is the lease id as 16 lowercase hex digits, and
    the key <prefix>/sessions/<sid> (value: the owner) is attached to it. etcd counts lease
    TTLs in whole seconds: OpenSession asks for the TTL rounded down to a second (a TTL under
    one second is refused with spi.ErrInvalidOption) and reports that as the time left.
  - Keep-alive is one LeaseKeepAliveOnce for the session's lease, whatever the number of names
    it holds, then one read-only transaction that reports the session's held leases (the index
    <prefix>/held/<sid>/) and each requested group's members.
  - A lease is the key <prefix>/leases/<name>, attached to the holder's etcd lease; its value
    is the holder's owner and its create revision the fencing token. Acquire, Release, Join
    and Leave are one etcd transaction each, guarded by compares on create revisions and on
    the lease a key is attached to (see spec/etcd.yaml for their exact shape).
  - Tokens are etcd revisions: the store-wide revision only grows and is never issued twice,
    and a new tenure creates the lease key afresh, so each tenure's token is greater than every
    earlier one of that name, across holders, expiries, leader changes and restarts, and
    compaction does not touch it (spec/etcd.yaml explains why a per-name counter key was not
    chosen). Restoring an older snapshot rewinds revisions: restore with `etcdutl snapshot
    restore --bump-revision <n> --mark-compacted`.
  - When a session's lease expires or is revoked, etcd deletes every key attached to it in one
    revision: the session key, its leases and its memberships. Hints come from watches on the
    lease prefix (a deletion is a Released hint) and the groups prefix (GroupChanged).
  - A lease held by another session is reported HeldBy with its time left unknown: etcd's
    LeaseTimeToLive only counts whole seconds, and the watch tells waiters the moment the
    holder's keys go. etcd revokes expired leases on a timer of its own (every 500 ms), so a
    crashed holder's lease is freed up to that much after its TTL.

# Keys Simba did not write

Simba's keys are meant to be written by Simba only (with etcd's authentication, give other users
no write access to the prefix). A key at a lease path that is attached to no lease (a Put by
hand) holds that name for good: it is reported HeldBy the session id 0000000000000000 until
someone deletes it. Keep-alive trusts the held index: an operator who deletes a lease key by hand
must delete its held key too (or revoke the holder's lease, which deletes both), or the
holder keeps believing it holds the lease until its session ends.

Open a backend with New (a DSN, see ParseDSN), NewFromConfig, or NewFromClient (a
*clientv3.Client you own). Tokens and sessions live in etcd; nothing is kept by the client
but, per session, when its lease was last renewed.
*/
package etcd
