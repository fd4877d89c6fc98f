// Package child starts the processes of the test harness (control-plane
// components, real clients, the containers of test/node) so that none of
// them can outlive the test process: each child gets a parent-death signal
// and a process group of its own.
//
// The parent-death signal is delivered when the thread that forked the
// child exits, not when the process does. Start therefore forks from a
// goroutine locked to its OS thread for the child's whole life, so that the
// Go runtime cannot retire that thread while the child runs.
package child
