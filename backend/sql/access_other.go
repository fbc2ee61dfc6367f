//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sql

// notWritable: this platform does not tell; SQLite's own error stands.
var notWritable = func(string) error { return nil }
