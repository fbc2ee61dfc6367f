package main

import "syscall"

// procAttr puts a server in a process group of its own and kills it if the harness dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
