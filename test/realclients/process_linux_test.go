package realclients

import "syscall"

// childSysProcAttr kills a client when the thread that started it dies, so
// that a crashed suite leaves no flagd behind.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
