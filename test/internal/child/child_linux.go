package child

import "syscall"

func sysProcAttr(a *syscall.SysProcAttr) *syscall.SysProcAttr {
	if a == nil {
		a = &syscall.SysProcAttr{}
	}
	a.Setpgid = true
	a.Pdeathsig = syscall.SIGKILL
	return a
}

func signalGroup(pgid int, sig syscall.Signal) error { return syscall.Kill(-pgid, sig) }
