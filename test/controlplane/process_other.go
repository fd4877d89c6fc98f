//go:build !linux

package controlplane

import "errors"

// watchdog is Linux-only; elsewhere a crashed test may leave processes behind.
type watchdog struct{}

func startWatchdog([]int) (*watchdog, error) {
	return nil, errors.New("not supported on this platform")
}

func (*watchdog) disarm() {}

func childrenMentioning(string) ([]int, error) {
	return nil, errors.New("not supported on this platform")
}
