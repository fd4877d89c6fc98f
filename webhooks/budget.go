package webhooks

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Budget bounds the memory that FeatureFlag admissions hold at once; and,
// a budget of its own (For("pods")), Pod admissions.
//
// Judging a flag set against flagd's schema holds up to about 200 times
// its bytes at its peak (a 373 KB flag set of rules at the bound, 75 MiB;
// BenchmarkConcurrentRuleBoundAdmissions), and the API server sends the
// webhook as many admissions at once as clients make; the webhook server
// reads and decodes each request whole (an update carries two objects) as
// soon as it comes. So each request to the FeatureFlag webhooks (the
// validator, and the spec author before it) takes its bytes from its
// namespace's share and from the manager's whole budget once its head is
// read, before the rest (budgeted), and gives them back when it is
// answered. A namespace's share is half the whole, so that one tenant's
// burst of large flag sets leaves room for the others'; a request larger
// than a share takes the whole share.
//
// An admission that cannot take its bytes within Wait is refused with
// 429 Too Many Requests, which kubectl prints and GitOps tools retry,
// before the API server's own timeout of the webhook (5 s) would refuse
// it with no reason.
type Budget struct {
	// what it admits, for its refusals: FeatureFlags unless For says.
	what  string
	bytes int64
	wait  time.Duration
	all   *semaphore.Weighted

	mu     sync.Mutex
	shares map[string]*share
}

type share struct {
	sem   *semaphore.Weighted
	users int
}

// Defaults of NewBudget's arguments (--flagset-admission-bytes,
// --flagset-admission-wait).
const (
	DefaultAdmissionBytes = 1 << 20
	DefaultAdmissionWait  = 2 * time.Second
)

// NewBudget is a budget of bytes in all (a namespace may hold half), for
// which an admission waits at most wait.
func NewBudget(bytes int64, wait time.Duration) *Budget {
	bytes = max(bytes, 2)
	return &Budget{what: "FeatureFlags", bytes: bytes, wait: wait, all: semaphore.NewWeighted(bytes), shares: map[string]*share{}}
}

// For names what b admits (plural: "pods"), as its refusals say, and
// returns b.
func (b *Budget) For(what string) *Budget {
	b.what = what
	return b
}

// Share is what one namespace may hold at once.
func (b *Budget) Share() int64 { return b.bytes / 2 }

// BusyError is the refusal of an admission that did not get its bytes in
// time.
type BusyError struct {
	// What the budget admits: FeatureFlags, pods.
	What      string
	Namespace string
	Bytes     int64
	// Namespace's share was taken: its own admissions hold it (else the
	// manager's whole budget was taken).
	OwnShare bool
	Waited   time.Duration
}

func (e *BusyError) Error() string {
	whose := e.What + " of every namespace"
	if e.OwnShare {
		whose = fmt.Sprintf("other %s of namespace %s", e.What, e.Namespace)
	}
	return fmt.Sprintf("the webhook is judging %s and could not take this one's %d bytes within %s; try again",
		whose, e.Bytes, e.Waited.Round(time.Millisecond))
}

// Take takes size bytes for an admission in namespace, waiting at most
// the budget's wait (or until ctx ends), and returns the function that
// gives them back. A nil Budget takes nothing.
func (b *Budget) Take(ctx context.Context, namespace string, size int64) (release func(), err error) {
	if b == nil {
		return func() {}, nil
	}
	weight := min(max(size, 1), b.Share())
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, b.wait)
	defer cancel()
	s := b.share(namespace)
	if err := s.sem.Acquire(ctx, weight); err != nil {
		b.leave(namespace)
		return nil, &BusyError{What: b.what, Namespace: namespace, Bytes: size, OwnShare: true, Waited: time.Since(start)}
	}
	if err := b.all.Acquire(ctx, weight); err != nil {
		s.sem.Release(weight)
		b.leave(namespace)
		return nil, &BusyError{What: b.what, Namespace: namespace, Bytes: size, Waited: time.Since(start)}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			b.all.Release(weight)
			s.sem.Release(weight)
			b.leave(namespace)
		})
	}, nil
}

// share is namespace's share, held until leave: a namespace with no
// admission under way keeps none.
func (b *Budget) share(namespace string) *share {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.shares[namespace]
	if s == nil {
		s = &share{sem: semaphore.NewWeighted(b.Share())}
		b.shares[namespace] = s
	}
	s.users++
	return s
}

func (b *Budget) leave(namespace string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.shares[namespace]; s != nil {
		if s.users--; s.users == 0 {
			delete(b.shares, namespace)
		}
	}
}

// busy is the answer to an admission refused by err.
func busy(err error) admission.Response {
	resp := admission.Errored(http.StatusTooManyRequests, err)
	resp.Result.Reason = metav1.StatusReasonTooManyRequests
	return resp
}
