//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sql

// openGate: there is no cross-process gate on this platform; the processes' writers meet in
// SQLite's busy handler.
func openGate(string) gateLock { return nil }
