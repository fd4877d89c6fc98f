package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// tokenKey is one projected service-account token of a pod.
type tokenKey struct {
	serviceAccount string
	audience       string
	expiration     int64 // seconds requested
}

// token is a token as issued.
type token struct {
	value   string
	issued  time.Time // our clock, when requested
	expires time.Time // the API server's expirationTimestamp
}

// refreshAt is when the kubelet would replace the token: at 80 % of its
// life, and at the latest after 24 hours.
func (t token) refreshAt() time.Time {
	life := t.expires.Sub(t.issued)
	at := t.issued.Add(life * 8 / 10)
	if day := t.issued.Add(24 * time.Hour); day.Before(at) {
		at = day
	}
	return at
}

// podTokens requests and caches the service-account tokens of one pod
// through the TokenRequest API, bound to the pod (so that they stop
// working when it is deleted), and asks for a re-projection when one is
// due for rotation.
type podTokens struct {
	client  kubernetes.Interface
	pod     *corev1.Pod // name, namespace and uid only are read
	refresh func()      // called when a token is due

	mu     sync.Mutex
	tokens map[tokenKey]token
	timers map[tokenKey]*time.Timer
	closed bool
}

func newPodTokens(client kubernetes.Interface, pod *corev1.Pod, refresh func()) *podTokens {
	return &podTokens{client: client, pod: pod, refresh: refresh,
		tokens: map[tokenKey]token{}, timers: map[tokenKey]*time.Timer{}}
}

// get returns a valid token for k, requesting one when there is none or
// the cached one is due.
func (p *podTokens) get(ctx context.Context, k tokenKey) (string, error) {
	p.mu.Lock()
	t, ok := p.tokens[k]
	p.mu.Unlock()
	if ok && time.Now().Before(t.refreshAt()) {
		return t.value, nil
	}
	t, err := p.request(ctx, k)
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return t.value, nil
	}
	p.tokens[k] = t
	if old := p.timers[k]; old != nil {
		old.Stop()
	}
	p.timers[k] = time.AfterFunc(time.Until(t.refreshAt()), p.refresh)
	return t.value, nil
}

func (p *podTokens) request(ctx context.Context, k tokenKey) (token, error) {
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &k.expiration,
		BoundObjectRef: &authenticationv1.BoundObjectReference{
			APIVersion: "v1", Kind: "Pod", Name: p.pod.Name, UID: p.pod.UID,
		},
	}}
	if k.audience != "" {
		tr.Spec.Audiences = []string{k.audience}
	}
	issued := time.Now()
	out, err := p.client.CoreV1().ServiceAccounts(p.pod.Namespace).CreateToken(ctx, k.serviceAccount, tr, metav1.CreateOptions{})
	if err != nil {
		return token{}, fmt.Errorf("requesting a token of service account %s/%s (audience %q): %w",
			p.pod.Namespace, k.serviceAccount, k.audience, err)
	}
	return token{value: out.Status.Token, issued: issued, expires: out.Status.ExpirationTimestamp.Time}, nil
}

func (p *podTokens) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, t := range p.timers {
		t.Stop()
	}
}
