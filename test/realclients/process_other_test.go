//go:build !linux

package realclients

import "syscall"

// childSysProcAttr has no parent-death signal outside Linux.
func childSysProcAttr() *syscall.SysProcAttr { return nil }
