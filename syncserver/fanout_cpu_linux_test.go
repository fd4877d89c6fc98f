package syncserver

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) a process has used so far:
// this one for pid 0, else the process pid.
func cpuTime(pid int) time.Duration {
	if pid == 0 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return 0
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	// utime and stime, fields 14 and 15 of stat, in clock ticks (100 Hz on Linux).
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// machineTicks is the machine's CPU time in clock ticks since boot: busy
// (everything but idle and iowait) and in all.
func machineTicks() (busy, total int64) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(stat), "\n")
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		return 0, 0
	}
	for i, f := range fields[1:] {
		n, _ := strconv.ParseInt(f, 10, 64)
		if i >= 8 { // guest time is counted in user time already
			break
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

// syscalls is the number of read and write system calls a process has made
// so far (/proc/<pid>/io): this one for pid 0, else the process pid.
func syscalls(pid int) (reads, writes int64) {
	name := "/proc/self/io"
	if pid != 0 {
		name = "/proc/" + strconv.Itoa(pid) + "/io"
	}
	io, err := os.ReadFile(name)
	if err != nil {
		return 0, 0
	}
	for line := range strings.Lines(string(io)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "syscr":
			reads = n
		case "syscw":
			writes = n
		}
	}
	return reads, writes
}
