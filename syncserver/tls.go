package syncserver

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// certReloader serves a certificate from files and loads it again when
// either file changes (cert-manager and the kubelet rotate mounted Secrets in
// place), checking at most once per second.
type certReloader struct {
	certFile, keyFile string

	mu        sync.Mutex
	cert      *tls.Certificate
	certMod   time.Time
	keyMod    time.Time
	lastCheck time.Time
}

func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cert != nil && time.Since(r.lastCheck) < time.Second {
		return r.cert, nil
	}
	cert, err := r.loadLocked()
	if err != nil && r.cert != nil {
		// A half-written rotation: keep serving the previous certificate.
		return r.cert, nil
	}
	return cert, err
}

func (r *certReloader) load() (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loadLocked()
}

func (r *certReloader) loadLocked() (*tls.Certificate, error) {
	r.lastCheck = time.Now()
	certInfo, err := os.Stat(r.certFile)
	if err != nil {
		return nil, fmt.Errorf("reading the TLS certificate: %w", err)
	}
	keyInfo, err := os.Stat(r.keyFile)
	if err != nil {
		return nil, fmt.Errorf("reading the TLS key: %w", err)
	}
	if r.cert != nil && certInfo.ModTime().Equal(r.certMod) && keyInfo.ModTime().Equal(r.keyMod) {
		return r.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the TLS key pair %s, %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert, r.certMod, r.keyMod = &cert, certInfo.ModTime(), keyInfo.ModTime()
	return r.cert, nil
}
