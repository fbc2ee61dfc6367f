//go:build !unix

package main

// notWritable: this platform does not tell; SQLite's own error stands.
var notWritable = func(string) error { return nil }
