//go:build unix

package main

import "golang.org/x/sys/unix"

// notWritable reports why this process may not write path (permission denied, a read-only
// file system), or nil when it may. A variable, for the tests.
var notWritable = func(path string) error { return unix.Access(path, unix.W_OK) }
