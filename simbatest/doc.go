// Package simbatest is Simba's in-memory backend for tests: one model of the wire semantics
// (Model), a goroutine-safe server over it that many clients in one process share like a real
// database (Server, with fault injection), and a virtual clock that tests advance
// (VirtualClock).
//
// # One model
//
// Model is the single implementation of the wire semantics (package spi's contract) outside the
// real backends: sessions with a TTL that never come back once expired, lease rows that are
// never deleted so a name's fencing token only grows (a plain counter: 1, 2, 3, where the real
// backends hand out microsecond-scale tokens with a clock floor; code under test
// must only compare tokens), re-acquire by the holder returning the same token, release only with the matching session and token, groups listing only live sessions,
// and hints for releases and membership changes. It is pure and deterministic: every operation
// takes the backend's time explicitly, session ids come from a seeded source, and it starts no
// goroutine and takes no lock. The simulator (internal/sim) drives it directly on virtual time;
// Server wraps the same Model for tests that run real clients on real goroutines. Both pass the
// conformance suites of package tck.
//
// By default a lease lives exactly as long as its holder's session, as on the SQL backends,
// ZooKeeper and etcd. WithLeaseExpiry gives the model Redis's semantics instead: a grant copies
// the session's expiry into the lease, only keep-alives that report the lease held move it, and
// a lease whose own expiry has passed is free for another session even while its holder's
// session lives — so a client that believes a term valid past its lease's own expiry (a
// keep-alive sent before the grant, run after it, extends the session but not the lease) is
// caught. Likewise a waiter's entry (spi.Queuer) lapses by default with its session's expiry as
// of its latest AcquireQueued, as on the SQL backends and Redis; WithSessionWaiters makes it
// live as long as its session, as on ZooKeeper and etcd (spi.SessionQueue), and
// WithUnknownRemaining leaves HeldBy's time left unknown, as there (spi.SteadyHints).
// WithReportAllHeld, WithoutExpiryHints and WithoutFairness are the other variants.
//
// # Server, backends and faults
//
// A test creates one Server and gives each client its own connection:
//
//	srv := simbatest.NewServer()  // backend time on a new VirtualClock
//	clock := srv.VirtualClock()
//	a, b := srv.Backend(), srv.Backend()
//	// simba.New(a, simba.WithClock(clock)), simba.New(b, simba.WithClock(clock)), ...
//
// Backend time is the server clock's Now when a call reaches the server. Clients and server
// usually share one VirtualClock, so advancing it moves both; WithClock gives the server another
// clock (a real one, say).
//
// Faults are set on a Backend (that client only) or on the Server (every client): FailNext
// fails calls without effect, FailOp fails every call of one SPI method with a given error
// until cleared (a condition that lasts, such as a permanent refusal), DropNextReplies lets calls take effect but lose their replies,
// DelayRequests and DelayReplies delay calls on the server's clock (honouring the call's
// context), CutOff cuts a client off (calls refused or hanging) until Restore, and Heal clears
// everything. NewLink wraps ANY backend (a real server's too) in a link a test can cut like a
// network partition, to crash a client without a goodbye. Server.ExpireSession expires a
// session now, Server.Restart loses every session but keeps lease tokens. Every injected
// failure is retryable (it matches spi.ErrUnavailable) unless the test passes its own error.
//
// Server.WaitHolder waits until a lease has a live holder (an election has a leader),
// Server.WaitFor until any condition on the server's state holds, and Server.Calls counts the
// calls that reached the server.
//
// # Virtual time, and tests without sleeps
//
// VirtualClock's time moves only in Advance and Set. Due timers fire in deadline order, each on
// its own goroutine, with Now equal to their deadline. The clock is an spi.Settler: every
// simba.Client on it reports its work, and Advance returns only once every client has processed
// everything due up to the new time — timers fired and stepped, calls the server answers at
// once made and their replies stepped, hints handled, OnElected/OnRevoked callbacks run,
// Schedule's function called. Settle (or Advance(0)) waits the same way without moving time.
// So a test reads state right after Advance, with no sleeps and no timer counts (see
// Example_failover):
//
//	srv := simbatest.NewServer()
//	clock := srv.VirtualClock()
//	linkA := simbatest.NewLink(srv.Backend())
//	a, _ := simba.New(linkA.Backend(), simba.WithClock(clock), simba.WithTTL(3*time.Second))
//	b, _ := simba.New(srv.Backend(), simba.WithClock(clock), simba.WithTTL(3*time.Second))
//	ea, _ := a.NewElection("jobs", simba.Schedule(time.Second, runJob))
//	eb, _ := b.NewElection("jobs", simba.Schedule(time.Second, runJob))
//	_ = ea.Start(ctx)
//	clock.Settle()                 // a is elected and has run the job: no time had to pass
//	_ = eb.Start(ctx)
//	linkA.CutOff()                 // a crashes without a goodbye
//	clock.Advance(4 * time.Second) // TTL + one renewal interval later...
//	_ = eb.IsLeader()              // ...b leads, and has run the job
//
// The clock never waits for what waits for it or for the test: calls held by a fault (a delay,
// a cut-off, a cut Link) until their timeout on the clock or a Restore; a Stop or StepDown made
// from a callback; leader work of RunWhileLeader and RunPartition (the user's code, which the
// clock cannot see). Hence callbacks and Schedule functions must not wait for the test, and a
// test that checks what leader work did after Advance has the work report through its own
// channel. A client's backend calls time out on the client's clock, so a hanging call fails
// after one renewal interval of virtual time.
//
// Runs repeat, within limits. Session ids come from the model's seed and each client's jitter
// from its simba.WithSeed, and a seeded client orders what falls due for it at one instant
// itself — its timers (whatever order the clock fires ties in: see ReverseTies) and its
// backend calls, which take turns in the order it started them — so a single client's course
// repeats to the nanosecond. Distinct clients still run on goroutines of their own: of
// several clients that contend for a free lease at one instant, which one wins differs from
// run to run, so a test that needs a given leader starts (and settles) that client first, as
// Example_failover does; likewise a client takes a hint of another client's release and its
// own events of the same instant in either order, requests made at one instant from several
// goroutines reach a client in either order (and a request made before the client settled,
// before or after its replies in flight: settle after New and after each Start), and delays of calls made at one instant
// (DelayRequests, DelayReplies) end in either order. A scenario whose clients act at
// distinct instants, or settle one after the other, repeats; otherwise, assert on who leads,
// with which token and in which order, not on the nanosecond of a retry.
//
// A paused process (a GC pause, SIGSTOP) is a client whose clock stands still while the
// server's moves: give that client a VirtualClock of its own (the server keeps its own through
// NewServer), advance the server's clock for the others, then the paused client's to let it
// run again. Its term reads valid by its own clock while it is held, as a paused process's
// would if it could look, and invalid once its clock has caught up past its deadline.
//
// BlockUntil is for code that is not a simba.Client: it waits until such code, running on
// goroutines the clock does not know, has armed its timers.
package simbatest
