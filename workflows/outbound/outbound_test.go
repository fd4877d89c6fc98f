package outbound

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// counting is a server that counts the requests it gets.
func counting(t *testing.T, answer http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if answer != nil {
			answer(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s, &n
}

func readAll(r io.Reader) error { _, err := io.Copy(io.Discard, r); return err }

// TestOutboundFollowsNoRedirect: a pod that answers 302 does not send the
// manager's GET anywhere else. (Before, http.DefaultClient followed up to
// 10 redirects, to any address.)
func TestOutboundFollowsNoRedirect(t *testing.T) {
	g := NewWithT(t)
	elsewhere, hits := counting(t, nil)
	pod, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/anything", http.StatusFound)
	})
	err := New(Client{}).Get(context.Background(), pod.URL+"/metrics", readAll)
	g.Expect(err).To(MatchError("answered 302: redirects are not followed"))
	g.Expect(hits.Load()).To(BeZero())

	// The client that was used before follows it: the test can tell.
	resp, err := http.DefaultClient.Get(pod.URL + "/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(hits.Load()).To(Equal(int32(1)))
}

// TestOutboundBoundsTimeAndBytes: a peer that never answers, or trickles
// its answer, costs ReadTimeout; an answer past MaxBytes is refused.
func TestOutboundBoundsTimeAndBytes(t *testing.T) {
	g := NewWithT(t)
	o := New(Client{ReadTimeout: 300 * time.Millisecond, MaxBytes: 1000})
	release := make(chan struct{})
	defer close(release)
	silent, _ := counting(t, func(http.ResponseWriter, *http.Request) { <-release })
	err := o.Get(context.Background(), silent.URL, readAll)
	g.Expect(err).To(MatchError("no answer within 300ms"))

	trickle, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		for {
			if _, err := w.Write([]byte("#")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-release:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	err = o.Get(context.Background(), trickle.URL, readAll)
	g.Expect(err).To(MatchError("no answer within 300ms"))

	large, _ := counting(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(strings.Repeat("x", 1001))) })
	err = o.Get(context.Background(), large.URL, readAll)
	g.Expect(err).To(MatchError(ContainSubstring("larger than the manager reads (1000 bytes)")))
	exact, _ := counting(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(strings.Repeat("x", 1000))) })
	g.Expect(o.Get(context.Background(), exact.URL, readAll)).To(Succeed())

	failing, _ := counting(t, func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "nope", http.StatusServiceUnavailable) })
	g.Expect(o.Get(context.Background(), failing.URL, readAll)).To(MatchError("answered 503"))

	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	_ = l.Close()
	err = o.Get(context.Background(), "http://"+addr+"/metrics", readAll)
	g.Expect(err).To(MatchError(ContainSubstring("connection refused")))
	g.Expect(err.Error()).NotTo(ContainSubstring(addr), "errors do not repeat the address")
}

// TestOutboundUsesNoProxy: the manager's HTTP_PROXY does not carry the
// gates' reads. Go reads the proxy settings once per process, so the read
// runs in a process of its own (outboundProxyHelper), for an address that
// is not the loopback (which Go never proxies); the same read with the
// client used before goes through the proxy, which shows that the test
// can fail.
func TestOutboundUsesNoProxy(t *testing.T) {
	if os.Getenv("FLAGPLANE_OUTBOUND_HELPER") != "" {
		outboundProxyHelper(t)
		return
	}
	g := NewWithT(t)
	ip := nonLoopbackIP()
	if ip == "" {
		t.Skip("no address but the loopback: Go proxies no loopback address")
	}
	proxy, proxied := counting(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("via the proxy")) })
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	g.Expect(err).NotTo(HaveOccurred())
	target := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("direct"))
	})}}
	target.Start()
	defer target.Close()
	for _, client := range []string{"outbound", "default"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestOutboundUsesNoProxy$")
		cmd.Env = append(os.Environ(), "FLAGPLANE_OUTBOUND_HELPER="+client, "HTTP_PROXY="+proxy.URL, "http_proxy="+proxy.URL,
			"NO_PROXY=", "no_proxy=", "FLAGPLANE_OUTBOUND_TARGET="+target.URL)
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
	}
	g.Expect(proxied.Load()).To(Equal(int32(1)), "only the default client went through the proxy")
}

func outboundProxyHelper(t *testing.T) {
	target := os.Getenv("FLAGPLANE_OUTBOUND_TARGET")
	var body string
	switch os.Getenv("FLAGPLANE_OUTBOUND_HELPER") {
	case "outbound":
		err := New(Client{}).Get(context.Background(), target, func(r io.Reader) error {
			b, err := io.ReadAll(r)
			body = string(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if body != "direct" {
			t.Fatalf("the outbound client read %q", body)
		}
	default:
		resp, err := http.DefaultClient.Get(target)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	fmt.Println("read", target)
}

// nonLoopbackIP is an IPv4 address of this machine that is not the
// loopback, "" when it has none.
func nonLoopbackIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}
