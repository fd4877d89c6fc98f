package node_test

import (
	"net"
	"net/http"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeServer is an HTTP endpoint the spec controls, for a readiness
// probe to hit: 503 until setHealthy(true).
type probeServer struct {
	addr *net.TCPAddr
	mu   sync.Mutex
	ok   bool
	uas  []string
}

func newProbeServer() *probeServer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	s := &probeServer{addr: l.Addr().(*net.TCPAddr)}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.uas = append(s.uas, r.UserAgent())
		if !s.ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})}
	go func() { _ = srv.Serve(l) }()
	DeferCleanup(srv.Close)
	return s
}

func (s *probeServer) port() intstr.IntOrString { return intstr.FromInt(s.addr.Port) }

func (s *probeServer) setHealthy(ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ok = ok
}

func (s *probeServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.uas)
}

func (s *probeServer) userAgents() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.uas...)
}
