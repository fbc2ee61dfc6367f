//go:build linux

package servers

import "syscall"

// serverAttr starts a server in a process group of its own (Kill kills the group) as cred,
// with a parent-death signal: a harness that dies takes its servers with it.
func serverAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred, Pdeathsig: syscall.SIGKILL}
}
