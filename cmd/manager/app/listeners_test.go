package app

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// selfSigned is a certificate for 127.0.0.1, and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webhook"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// served is a webhook server started by startWebhookServer.
type served struct {
	*webhookServer
	url    string
	client *http.Client
	cancel func()
	done   chan struct{}
}

// startWebhookServer serves a handler at /admit with drain, until cancel;
// done is closed when Start returns. Its client calls as the API server
// calls a webhook: HTTP/1.1 with keep-alive.
func startWebhookServer(t *testing.T, drain time.Duration) *served {
	t.Helper()
	cert, pool := selfSigned(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &webhookServer{listener: l, drain: drain, DefaultServer: webhook.NewServer(webhook.Options{}).(*webhook.DefaultServer)}
	s.AddTLSOpts(func(c *tls.Config) {
		c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }
	})
	s.Register("/admit", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("admitted")) }))
	ctx, cancel := context.WithCancel(context.Background())
	sv := &served{webhookServer: s, url: "https://" + l.Addr().String() + "/admit", cancel: cancel, done: make(chan struct{}),
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12},
			TLSNextProto:    map[string]func(string, *tls.Conn) http.RoundTripper{}}}}
	go func() {
		defer close(sv.done)
		if err := s.Start(ctx); err != nil {
			t.Errorf("webhook server: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-sv.done; sv.client.CloseIdleConnections() })
	return sv
}

// post sends one admission request.
func (sv *served) post() (*http.Response, error) {
	resp, err := sv.client.Post(sv.url, "application/json", nil)
	if err == nil {
		_ = resp.Body.Close()
	}
	return resp, err
}

// answering waits until the server answers, over a connection kept alive.
func (sv *served) answering(g Gomega) {
	g.Eventually(func() error { _, err := sv.post(); return err }).Should(Succeed())
}

// A stopping manager's webhook server answers what still arrives on the
// API server's kept-alive connections for its drain, each answer closing
// its connection, and only then shuts down. Without the drain the request
// that arrives on such a connection right after the stop fails: the API
// server does not retry it, and a pod is admitted without its flagd.
func TestWebhookServerDrainsBeforeItShutsDown(t *testing.T) {
	g := NewWithT(t)
	sv := startWebhookServer(t, 2*time.Second)
	sv.answering(g)

	sv.cancel()
	g.Eventually(sv.draining.Load).Should(BeTrue())
	resp, err := sv.post()
	g.Expect(err).NotTo(HaveOccurred(), "a request during the drain is answered")
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(resp.Close).To(BeTrue(), "the answer closes its connection")

	g.Eventually(sv.done).WithTimeout(5 * time.Second).Should(BeClosed())
	_, err = sv.post()
	g.Expect(err).To(HaveOccurred(), "shut down after the drain")
}

// With no drain (the tests' in-process managers) the server shuts down
// at once: the request after the stop finds no server.
func TestWebhookServerWithoutDrainShutsDownAtOnce(t *testing.T) {
	g := NewWithT(t)
	sv := startWebhookServer(t, 0)
	sv.answering(g)
	sv.cancel()
	g.Eventually(sv.done).WithTimeout(5 * time.Second).Should(BeClosed())
	_, err := sv.post()
	g.Expect(err).To(HaveOccurred())
}

// The manager begins the drain as soon as it is told to stop: by the time
// the webhook server itself is stopped (last), the drain has run, and it
// shuts down without waiting it again.
func TestWebhookServerDrainBegunEarlierIsNotWaitedAgain(t *testing.T) {
	g := NewWithT(t)
	sv := startWebhookServer(t, time.Hour)
	sv.answering(g)
	sv.beginDrain()
	g.Expect(sv.draining.Load()).To(BeTrue())
	// The hour of drain has passed since the manager was told to stop.
	sv.mu.Lock()
	sv.drainFrom = sv.drainFrom.Add(-time.Hour)
	sv.mu.Unlock()
	sv.cancel()
	g.Eventually(sv.done).WithTimeout(time.Minute).Should(BeClosed(), "the drain is not waited again")
}
