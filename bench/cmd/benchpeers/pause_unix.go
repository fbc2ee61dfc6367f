//go:build unix

package main

import (
	"os"
	"syscall"
)

// pauseProcess stops p (SIGSTOP), as a GC pause or a frozen VM would.
func pauseProcess(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }

// resumeProcess lets p, stopped by pauseProcess, go on (SIGCONT).
func resumeProcess(p *os.Process) error { return p.Signal(syscall.SIGCONT) }
