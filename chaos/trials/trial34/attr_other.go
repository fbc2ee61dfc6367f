//go:build unix && !linux

package main

import "syscall"

// procAttr puts a server in a process group of its own (the parent-death signal is Linux's).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
