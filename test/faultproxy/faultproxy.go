// Package faultproxy is an HTTPS reverse proxy in front of a Kubernetes API
// server that injects faults: conflicts (409), throttling (429 with
// Retry-After), internal errors (500), timeouts (the request is carried out
// but its answer is lost: 504 after a delay), watches cut in the middle of
// their stream, and watches refused as expired (410), which make a client
// list again and its informers deliver every object anew.
//
// Point a client's rest.Config (or kubeconfig) at the proxy: it speaks to
// the API server with the credentials of the rest.Config it was started
// with, whatever the client presents. Faults follow Rules, each with a
// probability, drawn from a seeded generator; they can be switched at any
// time (SetRules), so that a spec sets up its world first. Every request is
// counted by verb, resource and what became of it (Counts).
package faultproxy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"maps"
	"math/big"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/flagplane/flagplane/metrics"
)

// Fault is what the proxy does to a request instead of, or besides,
// forwarding it.
type Fault string

const (
	// Conflict answers 409 Conflict without forwarding.
	Conflict Fault = "conflict-409"
	// TooManyRequests answers 429 with Retry-After: 1 without forwarding;
	// client-go waits and sends the request again by itself.
	TooManyRequests Fault = "throttled-429"
	// InternalError answers 500 without forwarding.
	InternalError Fault = "internal-500"
	// Timeout forwards the request, so that it takes effect, then holds the
	// answer for Rule.Delay and replaces it with 504 Timeout: the client
	// cannot know whether its request was carried out.
	Timeout Fault = "timeout-504"
	// DropWatch forwards a watch and cuts its stream after a random time of
	// up to Rule.Delay; the client watches again from where it was.
	DropWatch Fault = "dropped-watch"
	// ExpireWatch refuses a watch with 410 Expired, as an API server does
	// when the client's resourceVersion is too old: the client lists again
	// and its informers deliver every object again.
	ExpireWatch Fault = "expired-watch-410"
)

// Rule injects Fault into a share of the requests it matches.
type Rule struct {
	Fault Fault
	// Verbs and Resources restrict the rule (metrics.ClassifyRequest's names:
	// "apply", "configmaps", "featureflags.core.openfeature.dev/status");
	// empty matches all. ExceptResources are never matched.
	Verbs, Resources, ExceptResources []string
	// Probability of the fault for each matching request, 0 to 1.
	Probability float64
	// Delay: how long a Timeout holds the answer; the longest a DropWatch
	// lets a watch live.
	Delay time.Duration
}

func (r Rule) matches(verb, resource string, watch bool) bool {
	switch r.Fault {
	case DropWatch, ExpireWatch:
		if !watch {
			return false
		}
	default:
		if watch {
			return false
		}
	}
	if len(r.Verbs) > 0 && !slices.Contains(r.Verbs, verb) {
		return false
	}
	if len(r.Resources) > 0 && !slices.Contains(r.Resources, resource) {
		return false
	}
	return !slices.Contains(r.ExceptResources, resource)
}

// Outcome is what became of requests of one kind: forwarded with a status
// code (Fault empty), or a fault.
type Outcome struct {
	Verb, Resource string
	Fault          Fault
	// Code is the status code of a forwarded request's answer (for Timeout
	// and DropWatch, of the answer the client did not get in full); 0 when
	// the API server gave none.
	Code int
}

// Counts are outcomes counted.
type Counts map[Outcome]int

// Count sums the outcomes for which match is true (all when nil).
func (c Counts) Count(match func(Outcome) bool) int {
	n := 0
	for o, k := range c {
		if match == nil || match(o) {
			n += k
		}
	}
	return n
}

// Add returns the sum of c and other.
func (c Counts) Add(other Counts) Counts {
	out := maps.Clone(c)
	if out == nil {
		out = Counts{}
	}
	for o, k := range other {
		out[o] += k
	}
	return out
}

// Sub returns what c counts beyond before.
func (c Counts) Sub(before Counts) Counts {
	out := Counts{}
	for o, k := range c {
		if d := k - before[o]; d != 0 {
			out[o] = d
		}
	}
	return out
}

// String renders the counts as a table, sorted by resource, verb and outcome.
func (c Counts) String() string {
	keys := slices.SortedFunc(maps.Keys(c), func(a, b Outcome) int {
		for _, x := range []int{strings.Compare(a.Resource, b.Resource), strings.Compare(a.Verb, b.Verb),
			strings.Compare(string(a.Fault), string(b.Fault)), a.Code - b.Code} {
			if x != 0 {
				return x
			}
		}
		return 0
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%-48s %-16s %-22s %6s\n", "resource", "verb", "outcome", "count")
	for _, o := range keys {
		res := o.Resource
		if res == "" {
			res = "(non-resource)"
		}
		outcome := "forwarded " + strconv.Itoa(o.Code)
		if o.Fault != "" {
			outcome = string(o.Fault)
		}
		fmt.Fprintf(&b, "%-48s %-16s %-22s %6d\n", res, o.Verb, outcome, c[o])
	}
	return b.String()
}

// Options configure Start.
type Options struct {
	// Rules to start with; none forwards everything.
	Rules []Rule
	// Seed of the generator that draws the faults.
	Seed uint64
}

// Proxy is a running fault-injecting proxy.
type Proxy struct {
	// URL is the proxy's address, https://127.0.0.1:PORT.
	URL string
	// CAData is the PEM certificate that clients must trust.
	CAData []byte

	server   *http.Server
	upstream *url.URL
	rt       http.RoundTripper
	forward  *httputil.ReverseProxy

	mu      sync.Mutex
	rules   []Rule
	rand    *mathrand.Rand
	counts  Counts
	watches map[*watchStream]struct{}
}

// watchStream is a watch being forwarded, which CutWatches may cut.
type watchStream struct {
	o      Outcome
	cancel context.CancelFunc
}

// Start serves a proxy to the API server of upstream on a loopback port.
func Start(upstream *rest.Config, o Options) (*Proxy, error) {
	target, err := url.Parse(upstream.Host)
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's address: %w", err)
	}
	if target.Scheme == "" {
		target.Scheme = "https"
	}
	rt, err := rest.TransportFor(upstream)
	if err != nil {
		return nil, fmt.Errorf("building the transport to the API server: %w", err)
	}
	cert, caPEM, err := selfSigned()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening: %w", err)
	}
	p := &Proxy{
		URL:      "https://" + ln.Addr().String(),
		CAData:   caPEM,
		upstream: target,
		rt:       rt,
		rules:    o.Rules,
		rand:     mathrand.New(mathrand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)),
		counts:   Counts{},
		watches:  map[*watchStream]struct{}{},
	}
	p.forward = &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:     rt,
		FlushInterval: -1,                         // watches stream
		ErrorLog:      log.New(io.Discard, "", 0), // cut streams are the point
		ModifyResponse: func(resp *http.Response) error {
			// The status code is known once the answer starts.
			if c, ok := resp.Request.Context().Value(codeKey{}).(*int); ok {
				*c = resp.StatusCode
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	p.server = &http.Server{
		Handler:   p,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	go func() { _ = p.server.ServeTLS(ln, "", "") }()
	return p, nil
}

// Close stops the proxy and cuts every connection.
func (p *Proxy) Close() error { return p.server.Close() }

// SetRules replaces the rules; nil forwards everything.
func (p *Proxy) SetRules(rules []Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = rules
}

// CutWatches cuts every watch being forwarded now, as a DropWatch would
// (counted as one each), and returns how many it cut: watches opened before the rules changed live for
// minutes otherwise, out of reach of the rules.
func (p *Proxy) CutWatches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.watches)
	for w := range p.watches {
		w.cancel()
		o := w.o
		o.Fault, o.Code = DropWatch, 0
		p.counts[o]++
		delete(p.watches, w)
	}
	return n
}

// Counts returns what the proxy did so far.
func (p *Proxy) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.counts)
}

// Config is a rest.Config for a client of the proxy.
func (p *Proxy) Config() *rest.Config {
	return &rest.Config{Host: p.URL, TLSClientConfig: rest.TLSClientConfig{CAData: p.CAData}}
}

// Kubeconfig is a kubeconfig for a client of the proxy.
func (p *Proxy) Kubeconfig() ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.URL, CertificateAuthorityData: p.CAData}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	return clientcmd.Write(*cfg)
}

type codeKey struct{}

// pick draws the fault for a request, if any: the first rule that matches
// and whose draw hits.
func (p *Proxy) pick(verb, resource string, watch bool) (Rule, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.rules {
		if r.matches(verb, resource, watch) && p.rand.Float64() < r.Probability {
			return r, true
		}
	}
	return Rule{}, false
}

func (p *Proxy) count(o Outcome) {
	p.mu.Lock()
	p.counts[o]++
	p.mu.Unlock()
}

func (p *Proxy) duration(maxD time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maxD/2 + time.Duration(p.rand.Int64N(int64(maxD/2)+1))
}

// ServeHTTP forwards a request, or injects a fault.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	verb, resource := metrics.ClassifyRequest(r)
	watch := r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1"
	rule, faulty := p.pick(verb, resource, watch)
	o := Outcome{Verb: verb, Resource: resource}
	if faulty {
		o.Fault = rule.Fault
	}
	switch {
	case !faulty && watch:
		// Counted however it ends: ReverseProxy aborts a cut stream (panics
		// with http.ErrAbortHandler, which the server takes as "reset the
		// stream").
		ctx, cancel := context.WithCancel(r.Context())
		ws := &watchStream{o: o, cancel: cancel}
		p.mu.Lock()
		p.watches[ws] = struct{}{}
		p.mu.Unlock()
		code := 0
		defer func() {
			cancel()
			p.mu.Lock()
			delete(p.watches, ws)
			p.mu.Unlock()
			o.Code = code
			p.count(o)
		}()
		p.forward.ServeHTTP(w, r.WithContext(context.WithValue(ctx, codeKey{}, &code)))
		return
	case !faulty:
		code := 0
		p.forward.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), codeKey{}, &code)))
		o.Code = code
	case rule.Fault == Conflict:
		writeStatus(w, http.StatusConflict, metav1.StatusReasonConflict, "injected by faultproxy: the object has been modified")
	case rule.Fault == TooManyRequests:
		w.Header().Set("Retry-After", "1")
		writeStatus(w, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "injected by faultproxy: too many requests")
	case rule.Fault == InternalError:
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "injected by faultproxy: internal error")
	case rule.Fault == ExpireWatch:
		writeStatus(w, http.StatusGone, metav1.StatusReasonExpired, "injected by faultproxy: too old resource version")
	case rule.Fault == Timeout:
		o.Code = p.forwardAndLose(r, rule.Delay)
		writeStatus(w, http.StatusGatewayTimeout, metav1.StatusReasonTimeout, "injected by faultproxy: the request was carried out, its answer lost")
	case rule.Fault == DropWatch:
		// Counted when it starts: a cut stream does not come back here.
		p.count(o)
		ctx, cancel := context.WithTimeout(r.Context(), p.duration(rule.Delay))
		defer cancel()
		p.forward.ServeHTTP(w, r.WithContext(ctx))
		return
	}
	p.count(o)
}

// forwardAndLose carries the request out at the API server, drops the
// answer, and waits d; it returns the status code the API server gave.
func (p *Proxy) forwardAndLose(r *http.Request, d time.Duration) int {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host, out.Host = p.upstream.Scheme, p.upstream.Host, p.upstream.Host
	code := 0
	if resp, err := p.rt.RoundTrip(out); err == nil {
		code = resp.StatusCode
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	select {
	case <-time.After(d):
	case <-r.Context().Done():
	}
	return code
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg,
	}
	if code == http.StatusTooManyRequests {
		st.Details = &metav1.StatusDetails{RetryAfterSeconds: 1}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(st)
}

// selfSigned makes a certificate for 127.0.0.1 that is its own CA.
func selfSigned() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("generating the proxy's key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "faultproxy"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("creating the proxy's certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	return cert, certPEM, err
}
