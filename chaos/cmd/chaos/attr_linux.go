//go:build linux

package main

import "syscall"

// workerAttr gives a worker a parent-death signal: a harness that dies takes its workers
// with it.
func workerAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
