package faultproxy

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// apiServer stands in for the API server: it counts what reaches it, and
// streams a watch until the client goes.
func apiServer(t *testing.T) (*rest.Config, *atomic.Int64) {
	var hits atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Query().Get("watch") == "true" {
			w.Header().Set("Content-Type", "application/json")
			for {
				if _, err := io.WriteString(w, `{"type":"BOOKMARK","object":{}}`+"\n"); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"ConfigMap","apiVersion":"v1"}`)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, &hits
}

func client(t *testing.T, p *Proxy) *http.Client {
	rt, err := rest.TransportFor(p.Config())
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: rt}
}

func do(t *testing.T, c *http.Client, p *Proxy, method, path string) (*http.Response, string) {
	req, err := http.NewRequest(method, p.URL+path, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPatch {
		req.Header.Set("Content-Type", "application/apply-patch+yaml")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp, string(body)
}

func reason(body string) metav1.StatusReason {
	var st metav1.Status
	_ = json.Unmarshal([]byte(body), &st)
	return st.Reason
}

func TestFaults(t *testing.T) {
	const cm = "/api/v1/namespaces/a/configmaps/b"
	for _, tc := range []struct {
		fault     Fault
		code      int
		reason    metav1.StatusReason
		forwarded bool
	}{
		{Conflict, 409, metav1.StatusReasonConflict, false},
		{TooManyRequests, 429, metav1.StatusReasonTooManyRequests, false},
		{InternalError, 500, metav1.StatusReasonInternalError, false},
		{Timeout, 504, metav1.StatusReasonTimeout, true},
	} {
		t.Run(string(tc.fault), func(t *testing.T) {
			g := NewWithT(t)
			upstream, hits := apiServer(t)
			p, err := Start(upstream, Options{Rules: []Rule{{Fault: tc.fault, Verbs: []string{"apply"}, Probability: 1, Delay: time.Millisecond}}})
			g.Expect(err).NotTo(HaveOccurred())
			defer p.Close()
			c := client(t, p)

			resp, _ := do(t, c, p, http.MethodGet, cm)
			g.Expect(resp.StatusCode).To(Equal(200), "a request no rule matches is forwarded")
			g.Expect(hits.Load()).To(BeEquivalentTo(1))

			resp, body := do(t, c, p, http.MethodPatch, cm)
			g.Expect(resp.StatusCode).To(Equal(tc.code))
			g.Expect(reason(body)).To(Equal(tc.reason))
			if tc.fault == TooManyRequests {
				g.Expect(resp.Header.Get("Retry-After")).To(Equal("1"))
			}
			wantHits := 1
			if tc.forwarded {
				wantHits = 2
			}
			g.Expect(hits.Load()).To(BeEquivalentTo(wantHits), "reached the API server")

			g.Expect(p.Counts()).To(Equal(Counts{
				{Verb: "get", Resource: "configmaps", Code: 200}:                                                      1,
				{Verb: "apply", Resource: "configmaps", Fault: tc.fault, Code: map[bool]int{true: 200}[tc.forwarded]}: 1,
			}))

			p.SetRules(nil)
			resp, _ = do(t, c, p, http.MethodPatch, cm)
			g.Expect(resp.StatusCode).To(Equal(200), "no rules, no faults")
		})
	}
}

func TestWatchFaults(t *testing.T) {
	const watch = "/api/v1/configmaps?watch=true"
	t.Run("expired", func(t *testing.T) {
		g := NewWithT(t)
		upstream, hits := apiServer(t)
		p, err := Start(upstream, Options{Rules: []Rule{{Fault: ExpireWatch, Probability: 1}}})
		g.Expect(err).NotTo(HaveOccurred())
		defer p.Close()
		resp, body := do(t, client(t, p), p, http.MethodGet, watch)
		g.Expect(resp.StatusCode).To(Equal(410))
		g.Expect(reason(body)).To(Equal(metav1.StatusReasonExpired))
		g.Expect(hits.Load()).To(BeZero())
	})

	t.Run("dropped", func(t *testing.T) {
		g := NewWithT(t)
		upstream, _ := apiServer(t)
		p, err := Start(upstream, Options{Rules: []Rule{{Fault: DropWatch, Probability: 1, Delay: 200 * time.Millisecond}}})
		g.Expect(err).NotTo(HaveOccurred())
		defer p.Close()
		resp, err := client(t, p).Get(p.URL + watch)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.StatusCode).To(Equal(200))
		data, err := io.ReadAll(resp.Body)
		g.Expect(err).To(HaveOccurred(), "the stream is cut, not ended")
		g.Expect(errors.Is(err, io.EOF)).To(BeFalse())
		g.Expect(string(data)).To(ContainSubstring("BOOKMARK"), "it streamed before it was cut")
		g.Expect(p.Counts()).To(Equal(Counts{{Verb: "watch", Resource: "configmaps", Fault: DropWatch}: 1}))
	})

	t.Run("cut", func(t *testing.T) {
		g := NewWithT(t)
		upstream, _ := apiServer(t)
		p, err := Start(upstream, Options{})
		g.Expect(err).NotTo(HaveOccurred())
		defer p.Close()
		resp, err := client(t, p).Get(p.URL + watch)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.StatusCode).To(Equal(200))
		g.Expect(p.CutWatches()).To(Equal(1))
		_, err = io.ReadAll(resp.Body)
		g.Expect(err).To(HaveOccurred(), "the stream is cut, not ended")
		g.Eventually(p.Counts).Should(Equal(Counts{
			{Verb: "watch", Resource: "configmaps", Code: 200}:        1,
			{Verb: "watch", Resource: "configmaps", Fault: DropWatch}: 1,
		}))
	})

	t.Run("a watch is not a write", func(t *testing.T) {
		g := NewWithT(t)
		upstream, _ := apiServer(t)
		p, err := Start(upstream, Options{Rules: []Rule{{Fault: InternalError, Probability: 1}}})
		g.Expect(err).NotTo(HaveOccurred())
		defer p.Close()
		resp, err := client(t, p).Get(p.URL + watch)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.StatusCode).To(Equal(200), "rules of other faults leave watches alone")
		_ = resp.Body.Close()
	})
}
