// Package simbatest is Simba's in-memory backend for tests: one model of the wire semantics
// (Model), a goroutine-safe server over it that many clients in one process share (Server, with
// fault injection), and a virtual clock that tests advance (VirtualClock).
//
// The Model is the single model of the wire semantics: the deterministic simulator
// (internal/sim) drives it directly on virtual time, and Server wraps it with a lock, a clock
// and faults for tests that run real clients on real goroutines.
package simbatest
