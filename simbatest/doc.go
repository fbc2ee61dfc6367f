// Package simbatest is Simba's in-memory backend for tests: one model of the wire semantics
// (Model), a goroutine-safe server over it that many clients in one process share like a real
// database (Server, with fault injection), and a virtual clock that tests advance
// (VirtualClock).
//
// # One model
//
// Model is the single implementation of the wire semantics of DESIGN.md §3 and §5 outside the
// real backends: sessions with a TTL that never come back once expired, lease rows that are
// never deleted so a name's fencing token only grows (a plain counter: 1, 2, 3, where the real
// backends hand out microsecond-scale tokens with a clock floor, DESIGN.md §5; code under test
// must only compare tokens), re-acquire by the holder returning the same token, release only with the matching session and token, groups listing only live sessions,
// and hints for releases and membership changes. It is pure and deterministic: every operation
// takes the backend's time explicitly, session ids come from a seeded source, and it starts no
// goroutine and takes no lock. The simulator (internal/sim) drives it directly on virtual time;
// Server wraps the same Model for tests that run real clients on real goroutines. Both pass the
// conformance suites of package tck.
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
// fails calls without effect, DropNextReplies lets calls take effect but lose their replies,
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
// # Virtual time
//
// VirtualClock's time moves only in Advance and Set. Due timers fire in deadline order, each on
// its own goroutine, with Now equal to their deadline; Advance returns after they have run.
// BlockUntil waits until the code under test has armed its timers, so a test can advance the
// clock without racing it. The Server arms no timers itself except for delay faults.
package simbatest
