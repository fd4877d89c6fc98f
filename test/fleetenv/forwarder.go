package fleetenv

import (
	"errors"
	"io"
	"net"
	"sync"
)

// Forwarder passes TCP connections to a member's API server, so that a
// spec can cut the member off from the hub (and only from the hub: the
// member's own flagplane talks to its API server directly) and let it
// rejoin.
type Forwarder struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]bool
}

// NewForwarder listens on a port of 127.0.0.1 the kernel picks and passes
// what it accepts to target (host:port).
func NewForwarder(target string) (*Forwarder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &Forwarder{ln: ln, target: target, conns: map[net.Conn]bool{}}
	go f.serve()
	return f, nil
}

// Addr is the Forwarder's host:port; the API server's certificate is for
// 127.0.0.1, so TLS holds through it.
func (f *Forwarder) Addr() string { return f.ln.Addr().String() }

// Cut closes every connection and refuses new ones until Rejoin.
func (f *Forwarder) Cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut = true
	for c := range f.conns {
		_ = c.Close()
	}
}

// Rejoin lets connections through again.
func (f *Forwarder) Rejoin() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut = false
}

// Close stops listening and closes every connection.
func (f *Forwarder) Close() { _ = f.ln.Close(); f.Cut() }

func (f *Forwarder) serve() {
	for {
		c, err := f.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		go f.pass(c)
	}
}

func (f *Forwarder) pass(c net.Conn) {
	if !f.track(c) {
		_ = c.Close()
		return
	}
	up, err := net.Dial("tcp", f.target)
	if err != nil || !f.track(up) {
		_ = c.Close()
		if up != nil {
			_ = up.Close()
		}
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = up.Close()
	f.mu.Lock()
	delete(f.conns, c)
	delete(f.conns, up)
	f.mu.Unlock()
}

func (f *Forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut {
		return false
	}
	f.conns[c] = true
	return true
}
