// Package simba is a Go library for leader election, distributed locks and partitioned
// leadership with fencing tokens, over PostgreSQL, MySQL/MariaDB, SQLite, Redis (standalone and
// Cluster), ZooKeeper and etcd.
//
// # Concepts
//
// A Client holds one backend session, kept alive by one keep-alive per renewal interval however
// many leases it holds. When the session expires every term it backed is revoked and a new
// session is opened; an expired session never comes back.
//
// A lease is a named exclusive right held by at most one live session. A Term is one tenure of
// one lease by this client: its name, its fencing token (strictly increasing per name across
// all holders), IsValid / Remaining (cheap: atomics and the monotonic clock) and a Context
// cancelled on revocation. Pass the token to the resource you protect and have it reject lower
// tokens: that, not the lease alone, is what makes a paused ex-leader harmless. Package fence
// does that check for SQL databases (fence/fencesql), Redis keys (fence/fenceredis) and HTTP
// services (fence/fencehttp); give it a fence.Verifier (fence.LeaseVerifier) and a token that
// is not the lease's — another lease's, or a made-up one — cannot raise a resource's highest
// and lock its holders out.
//
//   - Election: a long-lived candidacy (NewElection, Start, Stop, StepDown) with OnElected /
//     OnRevoked callbacks, leader work (RunWhileLeader, Schedule) and handover: a stopped
//     leader keeps the lease until its work exits, so no new leader starts while old work runs;
//     in one client, the work of a name runs one term at a time.
//   - Locks: Client.Lock, TryLock and WithLock take a name and return a *Held (its Term and
//     Unlock). Locks are calls, not objects, so that the common pattern — one lock per entity,
//     invoice-42, invoice-43, … — costs the client nothing once a lock is released: it keeps a
//     name only while some goroutine holds or waits for it. (The store keeps a record of every
//     name for good, so that its tokens only grow: see the backends' docs, and the README's
//     Locks section.) Goroutines of one client that want the same name take turns through one
//     backend lease, each with a term and a token of its own (each locks and unlocks for
//     itself, as with sync.Mutex or redislock's Obtain), and in the order they asked, which
//     sync.Mutex does not promise. Across clients, on a backend with waiter queues (spi.Queuer: the
//     in-memory simbatest, Redis, the SQL backends, ZooKeeper and etcd), a client that waits
//     registers as a waiter and a free lease goes to the longest-waiting live waiter first: a
//     waiter gets the lease after at most as many tenures as there were live waiters ahead of
//     it, so a holder that unlocks and locks again in a loop cannot keep it out. The bound
//     holds while the waiters keep their places: a server outage longer than a waiter's
//     session can last (its local deadline) takes its place on every backend, and on Redis and
//     the SQL backends, whose entries lapse at the session's expiry as of the waiter's latest
//     attempt, so can a shorter one that spans that expiry (see spi.Queuer); the queue then
//     forms again in the order the waiters come back. TryLock never waits and never queues;
//     when another goroutine of the same client holds the name, its ErrLockHeld error says
//     "held by this client" (LockHeldError.Self).
//   - PartitionGroup: P partitions spread over the group's live members by rendezvous hashing
//     (JoinGroup, Leave, Assigned, Held, Members).
//
// # Time
//
// The client never reads the wall clock for lease decisions. Remaining times come from the
// backend (its own clock decides), and the local deadline of a session is
// sentAt + remaining × (1 − drift) − margin on the client's monotonic clock, where sentAt is
// when the renewing request was sent. That clock (the default one; WithClock replaces it)
// counts the time the machine was suspended: Go's monotonic clock stops in a system sleep
// (laptop sleep, `systemctl suspend`, some VM snapshot/restore), the backend's clock does not,
// so after a resume a deadline on it alone would lie ahead though the backend has expired the
// session. On Linux the client reads CLOCK_BOOTTIME, on macOS CLOCK_MONOTONIC (both count
// sleep), only when the wall clock moved against the monotonic one, which a suspend does: at
// the first reading after a resume (IsValid's, a step's) the time slept is added, terms whose
// deadline passed in it are invalid at once and are revoked (reason deadline) with their
// session before any keep-alive, and the suspend is reported as a pause (EventPaused, "simba
// process paused" with a cause that says suspended). On other OSes a forward jump of the wall
// clock counts as a suspend (a wall clock set forward ends terms early, never late); on
// Windows Go's monotonic clock reads the interrupt time, which Microsoft documents as counting
// sleep (not tested on Windows here). A VM restored with its clocks stopped and set later by a guest agent is not seen
// until the wall clock is set. The wall clock never extends a term. Defaults (DefaultTTL and the other Default constants):
// TTL 15 s, renewal every TTL/3, drift 1 %, margin 50 ms, cooldown one TTL, retry jitter up to
// 25 ms, backoff from 50 ms up to the renewal interval. A backend that comes back after an
// outage is not left waiting for the backoff: while the session's calls (or a group's Join)
// fail, the client probes it (a cheap read, one at a time, the next at most a quarter of the
// renewal interval after the previous one failed: 100 ms at the least, 1 s at the most), and
// once it answers, the session is reopened or renewed and failed acquires (a group partition's
// too), Joins and Leaves are retried, and a group's failed members read read again, within
// 50 ms, a session call or Join still hanging on a connection the outage silenced being cut
// short (at most once per backoff bound, so that a flapping link cannot make clients hammer a
// backend). WithDrift(0), WithMargin(0)
// and WithJitter(0) mean zero, not the default; WithCooldown(0) means the default; WithTTL(0)
// and WithRenewEvery(0) are rejected. Every backend call is bounded by the renewal interval, and
// a call costs up to k round trips to the server (k from 2 on Redis and etcd to 6 on
// MySQL/MariaDB, measured per backend and call in the README's "Choosing a TTL", by
// bench/cmd/rtts), so keep the renewal interval at least 3 × k × the round-trip time: at the
// default renewal, a TTL of at least 9 × k × RTT.
//
// # Errors
//
// The sentinel errors (ErrInvalidName, ErrClosed, ErrNotHeld, ErrLockHeld, ErrUnavailable, …)
// are matched with errors.Is, and IsPermanent says whether retrying could heal an error (an
// Unlock's ErrNotHeld cannot be: the lease is not held, and only a new Lock holds it again). Lock
// retries what is not permanent itself while its ctx lasts, so what it returns is permanent (an
// invalid name or option, a closed client, a missing schema, refused credentials or
// privileges, a TLS failure, …) or comes from its ctx, joined with the last backend error.
// ErrAccessDenied matches a refusal of the client's credentials (a wrong or missing password,
// an unknown user or role) or privileges (a missing GRANT, a ZooKeeper ACL, an etcd role, a
// Redis ACL rule, a SQLite file this process may not write) on every backend, and says which.
// Of the context errors, context.Canceled is permanent (the caller chose to stop: retrying under the same ctx cannot
// help) and context.DeadlineExceeded is not (a new deadline may be enough): a Lock cancelled
// while it waits reports IsPermanent true, one that timed out false. An error that comes from
// the ctx also matches the ctx's cause, when one was given (context.WithCancelCause,
// WithTimeoutCause), and says it. A method given a nil ctx does nothing and returns an error
// matching ErrInvalidOption (Events and All take a nil ctx as one that never ends). A permanent
// backend error reaches a caller who waits as itself, never wrapped in ErrUnavailable (which
// says that retrying may help): TryLock returns the refused open of the session so too, and
// so does Lock, at once, while the client waits to retry that open (Client.Err is not nil):
// Lock waits out an outage, not a refusal. The client retries the open in the background and
// recovers by itself once the cause is fixed. Election.Start and JoinGroup succeed and run in the background, retrying what fails; their
// Err, and the Client's, report a permanent error meanwhile. Close returns a
// *SessionCloseError when the session's close call failed (the session lapses at its TTL).
//
// # Layers
//
// The decisions are made by a pure engine (no goroutines, clocks or I/O),
// checked by transcript tests and a deterministic simulator. The Client is its shell: one loop
// goroutine steps the engine and carries out its effects — backend calls on their own
// goroutines, timers, callbacks through a serial dispatcher per election (a grant's OnElected on
// the goroutine that received the grant, when it has nothing else to do), leader work on one
// goroutine per term (a name's next term's on its last term's, once that work returned). Backends implement the public SPI (package spi, as database/sql drivers
// implement database/sql/driver); package simbatest offers an
// in-memory one with fault injection and a virtual clock for your tests, and package tck the
// conformance suites every backend passes.
//
// The wire artifacts every backend uses (SQL, Lua, the ZooKeeper layout, the etcd transactions
// and the Go under generated/) come from the declarative spec in spec/; `go generate ./...`
// rebuilds them.
package simba
