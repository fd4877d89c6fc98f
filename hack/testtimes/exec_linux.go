package main

import "syscall"

// childAttr kills the test binary when testtimes dies.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
