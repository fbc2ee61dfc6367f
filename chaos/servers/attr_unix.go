//go:build unix && !linux

package servers

import "syscall"

// serverAttr starts a server in a process group of its own (Kill kills the group) as cred.
// There is no parent-death signal outside Linux: a harness that dies leaves its servers
// running (their data directories tell their ports).
func serverAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}
}
