//go:build !linux

package main

import "syscall"

// childAttr is nil where the kernel has no parent-death signal.
func childAttr() *syscall.SysProcAttr { return nil }
