//go:build !linux

package syncserver

import "time"

// cpuTime is not measured outside Linux.
func cpuTime(int) time.Duration { return 0 }
