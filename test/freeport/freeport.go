// Package freeport finds loopback ports that are free when asked, for the
// suites, the demo and the tools that must tell a process a port before
// that process binds it (a flag, a URL written into a Pod) or want an
// address where nothing listens.
//
// A port found here is not reserved: the listener that found it is closed
// before the function returns, and until the caller's process binds the
// port any other process of the machine may take it (on a busy CI machine
// some do). Prefer port 0 and reading back the address the listener got
// wherever its owner reports it (app.Manager.Addresses, the "listening"
// log lines that test/managerproc reads); use this only where that cannot
// be done, and retry where a lost race shows.
//
// It lives under test/, not test/internal/, so that hack/ can import it;
// it imports nothing but the standard library.
package freeport

import (
	"fmt"
	"net"
)

// Address is a loopback host:port ("127.0.0.1:N") whose port was free when
// asked; see the package documentation for the race this leaves.
func Address() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("looking for a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Ports are n distinct loopback ports that were free when asked: each is
// held until all n are found, so that they differ, then all are released
// (with the race of Address).
func Ports(n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("looking for %d free loopback ports: %w", n, err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
