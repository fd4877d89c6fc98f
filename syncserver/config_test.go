package syncserver

import (
	"flag"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
)

func TestConfigFlags(t *testing.T) {
	g := NewWithT(t)
	c := DefaultConfig()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	c.BindFlags(fs)
	g.Expect(c).To(Equal(Config{
		BindAddress: ":8015", MaxMessageSize: 4 << 20, ServiceAccountTokens: true, TokenAudience: "flagplane",
		TokenReviewQPS: 50, TokenReviewBurst: 100, TokenReviewPeerQPS: 1, TokenReviewPeerBurst: 10,
		TokenFailureTTL: 10 * time.Second, TokenFailureCacheSize: 4096,
	}))
	g.Expect(c.Enabled()).To(BeTrue())
	g.Expect(fs.Parse([]string{
		"--sync-bind-address=0", "--sync-max-message-size=1024", "--sync-token-audience=x", "--sync-max-connection-age=30m",
		"--sync-token-review-qps=2.5", "--sync-token-review-burst=7", "--sync-token-review-peer-qps=0", "--sync-token-review-peer-burst=3",
		"--sync-token-failure-ttl=1m", "--sync-token-failure-cache-size=100",
	})).To(Succeed())
	g.Expect(c.Enabled()).To(BeFalse())
	g.Expect(c.MaxMessageSize).To(Equal(1024))
	g.Expect(c.MaxConnectionAge).To(Equal(30 * time.Minute))
	g.Expect(c.TokenAudience).To(Equal("x"))
	g.Expect([]any{c.TokenReviewQPS, c.TokenReviewBurst, c.TokenReviewPeerQPS, c.TokenReviewPeerBurst}).To(Equal([]any{2.5, 7, 0.0, 3}))
	g.Expect(c.TokenFailureTTL).To(Equal(time.Minute))
	g.Expect(c.TokenFailureCacheSize).To(Equal(100))
}

func TestConfigValidate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "keys")
	if err := os.WriteFile(good, []byte("\n"+strings.Repeat("a", 32)+"\n  "+strings.Repeat("b", 40)+"  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	weak := filepath.Join(dir, "weak")
	if err := os.WriteFile(weak, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		c    Config
		err  string
	}{
		{name: "defaults", c: DefaultConfig()},
		{name: "disabled ignores the rest", c: Config{BindAddress: "0", TLSCertFile: "x"}},
		{name: "cert without key", c: Config{BindAddress: ":1", TLSCertFile: "x", ServiceAccountTokens: true}, err: "go together"},
		{name: "negative size", c: Config{BindAddress: ":1", MaxMessageSize: -1, ServiceAccountTokens: true}, err: "negative"},
		{name: "keys", c: Config{BindAddress: ":1", NamespaceTokenKeyFile: good}},
		{name: "namespace tokens only", c: Config{BindAddress: ":1", NamespaceTokenKeyFile: good, ServiceAccountTokens: false}},
		{name: "no credential at all", c: Config{BindAddress: ":1"}, err: "nobody could subscribe"},
		{name: "connection age", c: Config{BindAddress: ":1", ServiceAccountTokens: true, MaxConnectionAge: time.Hour}},
		{name: "negative connection age", c: Config{BindAddress: ":1", ServiceAccountTokens: true, MaxConnectionAge: -time.Hour}, err: "negative"},
		{name: "connection age under a minute", c: Config{BindAddress: ":1", ServiceAccountTokens: true, MaxConnectionAge: 5 * time.Second}, err: "under a minute"},
		{name: "weak keys", c: Config{BindAddress: ":1", NamespaceTokenKeyFile: weak}, err: "32 bytes"},
		{name: "no review limit", c: Config{BindAddress: ":1", ServiceAccountTokens: true}},
		{name: "negative review rate", c: Config{BindAddress: ":1", ServiceAccountTokens: true, TokenReviewQPS: -1}, err: "--sync-token-review-qps -1 is not a rate"},
		{name: "review rate without burst", c: Config{BindAddress: ":1", ServiceAccountTokens: true, TokenReviewQPS: 5}, err: "--sync-token-review-burst 0 must be at least 1"},
		{name: "peer rate without burst", c: Config{BindAddress: ":1", ServiceAccountTokens: true, TokenReviewPeerQPS: 5}, err: "--sync-token-review-peer-burst 0 must be at least 1"},
		{name: "negative failure TTL", c: Config{BindAddress: ":1", ServiceAccountTokens: true, TokenFailureTTL: -time.Second}, err: "--sync-token-failure-ttl -1s is negative"},
		{name: "negative failure cache", c: Config{BindAddress: ":1", ServiceAccountTokens: true, TokenFailureCacheSize: -1}, err: "--sync-token-failure-cache-size -1 is negative"},
		{name: "missing keys", c: Config{BindAddress: ":1", NamespaceTokenKeyFile: filepath.Join(dir, "none"), ServiceAccountTokens: true}, err: "reading"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := tc.c.Validate()
			if tc.err == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
		})
	}
	g := NewWithT(t)
	keys, err := ReadNamespaceTokenKeys(good)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keys.Keys).To(HaveLen(2))
	g.Expect(string(keys.Keys[1])).To(Equal(strings.Repeat("b", 40)))
}

// recordingObserver counts open streams by selector, ended ones by reason,
// refusals by code, and token reviews by result.
type recordingObserver struct {
	reviewResults
	mu      sync.Mutex
	open    map[string]int
	ended   map[string]int
	refused map[string]int
}

var _ Observer = (*recordingObserver)(nil)

func newRecordingObserver() *recordingObserver {
	return &recordingObserver{open: map[string]int{}, ended: map[string]int{}, refused: map[string]int{}}
}

func (r *recordingObserver) SyncRefused(code string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused[code]++
}

func (r *recordingObserver) counts() (ended, refused map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.ended), maps.Clone(r.refused)
}

func (r *recordingObserver) SyncPushed(time.Duration) {}

func (r *recordingObserver) SyncSubscribed(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open[s]++
}

func (r *recordingObserver) SyncUnsubscribed(s, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open[s]--
	r.ended[reason]++
}

func (r *recordingObserver) count(s string) func() int {
	return func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.open[s]
	}
}

func TestObserverAndNamespaceTokens(t *testing.T) {
	g := NewWithT(t)
	obs := newRecordingObserver()
	tokens := &NamespaceTokens{Keys: [][]byte{key(9)}}
	h := newHarness(t, func(o *Options) {
		o.Observer = obs
		o.Authenticator = Chain{tokens, o.Authenticator}
	})
	g.Expect(h.srv.NamespaceTokens()).To(BeIdenticalTo(tokens))
	ff := h.flagSet("shop", "checkout", "off")
	tok, err := h.srv.NamespaceTokens().Issue("shop")
	g.Expect(err).NotTo(HaveOccurred())

	c := h.client(t, tok)
	sub := subscribe(t, c, checkoutSelector)
	g.Expect(sub.next(t)).To(Equal(rendered(t, ff)))
	g.Expect(obs.count(checkoutSelector)()).To(Equal(1))
	other := subscribe(t, h.client(t, "shop-token"), checkoutSelector)
	g.Expect(other.next(t)).To(Equal(rendered(t, ff)))
	g.Expect(obs.count(checkoutSelector)()).To(Equal(2))
	sub.cancel()
	g.Eventually(obs.count(checkoutSelector)).Should(Equal(1))
	g.Eventually(h.srv.Subscribers).Should(Equal(1))

	withoutTokens := newHarness(t)
	g.Expect(withoutTokens.srv.NamespaceTokens()).To(BeNil())
}

// The observer hears why each stream ended and which calls were refused.
func TestObserverHearsWhyStreamsEndAndCallsAreRefused(t *testing.T) {
	g := NewWithT(t)
	obs := newRecordingObserver()
	h := newHarness(t, func(o *Options) {
		o.Observer = obs
		o.Authenticator = staticAuth{
			"shop-token":   {Namespace: "shop", ServiceAccount: "web"},
			"team-a-token": {Namespace: "team-a", ServiceAccount: "app"},
			"expiring":     {Namespace: "shop", Expires: time.Now().Add(300 * time.Millisecond)},
		}
	})
	h.flagSet("shop", "checkout", "off")

	left := subscribe(t, h.client(t, "shop-token"), checkoutSelector)
	left.next(t)
	left.cancel()
	expiring := subscribe(t, h.client(t, "expiring"), checkoutSelector)
	expiring.next(t)
	g.Expect(expiring.ended(t)).To(Equal(codes.Unauthenticated))

	g.Expect(subscribe(t, h.client(t, "nobody"), checkoutSelector).ended(t)).To(Equal(codes.Unauthenticated))
	g.Expect(subscribe(t, h.client(t, "team-a-token"), checkoutSelector).ended(t)).To(Equal(codes.PermissionDenied))
	g.Expect(subscribe(t, h.client(t, "shop-token"), "not-a-selector").ended(t)).To(Equal(codes.InvalidArgument))

	g.Eventually(func() map[string]int { e, _ := obs.counts(); return e }).Should(Equal(map[string]int{
		EndLeft: 1, EndCredentialExpired: 1,
	}))
	_, refused := obs.counts()
	g.Expect(refused).To(Equal(map[string]int{"Unauthenticated": 1, "PermissionDenied": 1, "InvalidArgument": 1}))
}
