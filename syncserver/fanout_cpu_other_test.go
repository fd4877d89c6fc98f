//go:build !linux

package syncserver

import "time"

// cpuTime is not measured outside Linux.
func cpuTime(int) time.Duration { return 0 }

// machineTicks is not measured outside Linux.
func machineTicks() (busy, total int64) { return 0, 0 }

// syscalls is not measured outside Linux.
func syscalls(int) (reads, writes int64) { return 0, 0 }
