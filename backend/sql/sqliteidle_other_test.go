//go:build !unix

package sql

// idleChild: the waiting-CPU benchmark (getrusage) is Unix-only.
func idleChild() bool { return false }
