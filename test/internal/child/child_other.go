//go:build !linux

package child

import (
	"os"
	"syscall"
)

// sysProcAttr has no parent-death signal outside Linux: a crashed test may
// leave children behind there.
func sysProcAttr(a *syscall.SysProcAttr) *syscall.SysProcAttr { return a }

func signalGroup(pid int, sig syscall.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Signal(sig)
}
