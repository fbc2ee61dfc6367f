//go:build !linux

package main

import "syscall"

// workerAttr is nil: there is no parent-death signal outside Linux, so a harness that dies
// does not take its workers with it.
func workerAttr() *syscall.SysProcAttr { return nil }
