package syncserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
)

// pingWithoutStreams opens a bare HTTP/2 connection (no gRPC stream, like an
// idle client with keepalive on) and sends pings every interval. It returns
// the number of ping acks, and the GOAWAY debug data if the server hung up.
func pingWithoutStreams(t *testing.T, addr string, pings int, interval time.Duration) (acks int, goaway string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	var writing sync.Mutex // the framer's writes are not safe for concurrent use
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	frames := make(chan http2.Frame, 100)
	go func() {
		defer close(frames)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
				writing.Lock()
				_ = fr.WriteSettingsAck()
				writing.Unlock()
			}
			frames <- f
		}
	}()
	for i := range pings {
		writing.Lock()
		err := fr.WritePing(false, [8]byte{byte(i + 1)})
		writing.Unlock()
		if err != nil {
			break // the server closed the connection
		}
		time.Sleep(interval)
	}
	deadline := time.After(time.Second)
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				return acks, goaway
			}
			switch f := f.(type) {
			case *http2.PingFrame:
				if f.IsAck() {
					acks++
				}
			case *http2.GoAwayFrame:
				goaway = string(f.DebugData())
			}
		case <-deadline:
			return acks, goaway
		}
	}
}

// Clients may ping as often as KeepaliveMinTime, also without streams;
// more often, and the server hangs up as gRPC's policy says.
func TestKeepalivePingsArePermitted(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	permissive := newHarness(t, func(o *Options) { o.KeepaliveMinTime = 50 * time.Millisecond })
	acks, goaway := pingWithoutStreams(t, permissive.addr, 6, 100*time.Millisecond)
	g.Expect(goaway).To(BeEmpty())
	g.Expect(acks).To(Equal(6))

	// The same client against a policy stricter than its pings (gRPC's
	// default is 5 minutes) is disconnected: the check above can fail.
	strict := newHarness(t, func(o *Options) { o.KeepaliveMinTime = time.Minute })
	_, goaway = pingWithoutStreams(t, strict.addr, 6, 100*time.Millisecond)
	g.Expect(goaway).To(Equal("too_many_pings"))
}

// writeCert writes a self-signed certificate for 127.0.0.1 with the given
// serial number.
func writeCert(t *testing.T, dir string, serial int64) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "flagplane-sync"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func servedSerial(t *testing.T, addr string) int64 {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // reads the certificate only
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

func TestTLSWithCertificateRotation(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	dir := t.TempDir()
	certFile, keyFile, pool := writeCert(t, dir, 1)
	h := newHarness(t, func(o *Options) { o.TLSCertFile, o.TLSKeyFile = certFile, keyFile })
	ff := h.flagSet("shop", "checkout", "off")

	c := h.client(t, "shop-token", grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	g.Expect(subscribe(t, c, checkoutSelector).next(t)).To(Equal(rendered(t, ff)))

	// A plaintext client gets nowhere.
	_, err := h.client(t, "shop-token").FetchAllFlags(context.Background(), nil)
	g.Expect(err).To(HaveOccurred())

	// cert-manager or the kubelet replaces the files: new connections get
	// the new certificate.
	writeCert(t, dir, 2)
	g.Eventually(func() int64 { return servedSerial(t, h.addr) }, 5*time.Second, 100*time.Millisecond).Should(BeEquivalentTo(2))
}

func TestNewRefusesHalfATLSConfiguration(t *testing.T) {
	g := NewWithT(t)
	_, err := New(newWorld(t).topo, Options{Authenticator: staticAuth{}, TLSCertFile: "x"})
	g.Expect(err).To(MatchError(ContainSubstring("both")))
	_, err = New(newWorld(t).topo, Options{})
	g.Expect(err).To(MatchError(ContainSubstring("Authenticator")))
	_, err = New(newWorld(t).topo, Options{Authenticator: staticAuth{}, TLSCertFile: "/nonexistent", TLSKeyFile: "/nonexistent"})
	g.Expect(err).To(HaveOccurred())
}

// MaxConnectionAge ends even a connection whose stream never ends, once its
// grace has passed, and the client's next stream gets the current state: this
// is what spreads subscribers over replicas again.
func TestMaxConnectionAgeRecyclesLongLivedStreams(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	h := newHarness(t, func(o *Options) {
		o.MaxConnectionAge = 300 * time.Millisecond
		o.MaxConnectionAgeGrace = 300 * time.Millisecond
	})
	ff := h.flagSet("shop", "checkout", "off")
	c := h.client(t, "shop-token")
	opened := time.Now()
	sub := subscribe(t, c, checkoutSelector)
	g.Expect(sub.next(t)).To(Equal(rendered(t, ff)))
	g.Expect(sub.ended(t)).To(Equal(codes.Unavailable))
	// gRPC jitters the age by up to 10 %.
	g.Expect(time.Since(opened)).To(BeNumerically(">=", 270*time.Millisecond+300*time.Millisecond))
	g.Eventually(h.srv.Subscribers).Should(BeZero())

	again := subscribe(t, c, checkoutSelector)
	g.Expect(again.next(t)).To(Equal(rendered(t, ff)), "the client resumes with the current state")
}
