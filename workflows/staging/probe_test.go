package staging

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/outbound"
)

// fakeFlagd serves /metrics with a count of errors that the test sets,
// and counts the reads in flight and their most.
type fakeFlagd struct {
	errors             atomic.Int64
	inFlight, mostSeen atomic.Int32
	hold               chan struct{}
	srv                *httptest.Server
}

func newFakeFlagd(t *testing.T) *fakeFlagd {
	f := &fakeFlagd{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := f.inFlight.Add(1)
		defer f.inFlight.Add(-1)
		for {
			most := f.mostSeen.Load()
			if n <= most || f.mostSeen.CompareAndSwap(most, n) {
				break
			}
		}
		if f.hold != nil {
			select {
			case <-f.hold:
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprintf(w, "%s{feature_flag_reason=\"ERROR\"} %d\n", FlagdErrorMetric, f.errors.Load())
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeFlagd) address() string { return strings.TrimPrefix(f.srv.URL, "http://") }

// blackHole is an address that accepts connections and never answers, as
// a pod behind a default-deny NetworkPolicy that drops (not refuses) does
// to the manager; closing it frees what it holds.
func blackHole(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

// sweeps is a Prober whose Notify says which policy's sweep ended.
func sweeps(t *testing.T, p *Prober) chan topology.Key {
	ended := make(chan topology.Key, 1000)
	p.Notify = func(k topology.Key) { ended <- k }
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p.Start(ctx)
	return ended
}

// TestProberCountsFromABaseline: a pod's errors count from its first read
// in the rollout; a flagd that restarts counts from zero; another rollout
// of the policy starts over.
func TestProberCountsFromABaseline(t *testing.T) {
	g := NewWithT(t)
	flagd := newFakeFlagd(t)
	flagd.errors.Store(40)
	var clock atomic.Int64 // seconds after t0: a sweep starts only when the test moves it
	p := &Prober{Now: func() time.Time { return t0.Add(time.Duration(clock.Load()) * time.Second) }}
	ended := sweeps(t, p)
	policy := topology.RolloutPolicyKey("team", "p")
	req := ProbeRequest{Pods: []ProbePod{{UID: "pod-1", Address: flagd.address()}}}
	read := func(rollout string) Readings {
		clock.Add(int64(DefaultInterval / time.Second))
		p.Read(policy, rollout, req)
		g.Eventually(ended).Should(Receive(Equal(policy)))
		got := p.Read(policy, rollout, req)
		g.Expect(got.Due).To(Equal(DefaultInterval), "the next sweep is due an interval after this one started")
		return got
	}
	got := p.Read(policy, "v2/1", req)
	g.Expect(got.Pods).To(BeEmpty(), "nothing read yet: a Read never waits")
	g.Expect(got.Due).To(BeZero(), "a sweep runs: its end notifies")
	g.Eventually(ended).Should(Receive(Equal(policy)))
	g.Expect(p.Read(policy, "v2/1", ProbeRequest{}).Pods).To(BeEmpty(), "only what is asked for")
	flagd.errors.Store(43)
	g.Expect(read("v2/1").Pods).To(Equal(map[string]PodReading{"pod-1": {Errors: 3}}))
	flagd.errors.Store(2) // restarted
	g.Expect(read("v2/1").Pods).To(Equal(map[string]PodReading{"pod-1": {Errors: 2}}))
	g.Expect(read("v3/2").Pods).To(Equal(map[string]PodReading{"pod-1": {Errors: 0}}), "another rollout takes its own baseline")
	g.Consistently(ended, 100*time.Millisecond).ShouldNot(Receive(), "no sweep but those the clock allowed")
}

// TestProberChargesItsPolicy: a tenant whose pods never answer costs its
// own policy's readings, and another tenant's gate is read meanwhile, at
// once; reads in flight stay within the policy's and the namespace's
// bounds; a pod that failed is skipped in the next sweeps. (Before, the
// reads ran one after another, 2 s each, inside the reconcile, on the
// queue's two workers: about 30 such pods held a worker for a minute.)
func TestProberChargesItsPolicy(t *testing.T) {
	g := NewWithT(t)
	p := &Prober{Interval: time.Nanosecond, Outbound: outbound.New(outbound.Client{ReadTimeout: 2 * time.Second})}
	ended := sweeps(t, p)
	hostile, victim := topology.RolloutPolicyKey("hostile", "p"), topology.RolloutPolicyKey("victim", "p")
	var holes []ProbePod
	for i := range 1000 {
		holes = append(holes, ProbePod{UID: fmt.Sprintf("hole-%d", i), Address: blackHole(t)})
	}
	p.Read(hostile, "bad/1", ProbeRequest{Pods: holes})
	flagd := newFakeFlagd(t)
	flagd.errors.Store(5)
	good := ProbeRequest{Pods: []ProbePod{{UID: "good", Address: flagd.address()}}}
	p.Read(victim, "v2/1", good)
	g.Eventually(ended).Should(Receive(Equal(victim)))
	flagd.errors.Store(9)
	p.Read(victim, "v2/1", good)
	g.Eventually(ended).Should(Receive(Equal(victim)))
	g.Expect(p.Read(victim, "v2/1", good).Pods["good"]).To(Equal(PodReading{Errors: 4}))
	g.Expect(p.running(hostile)).To(BeTrue(), "the hostile sweep still waits on its pods, and cost the victim nothing")

	// Bounds: 40 slow pods of one policy are read 8 at a time; two
	// policies of one namespace, 16 at a time together.
	slow := newFakeFlagd(t)
	slow.hold = make(chan struct{})
	var pods []ProbePod
	for i := range 40 {
		pods = append(pods, ProbePod{UID: fmt.Sprintf("slow-%d", i), Address: slow.address()})
	}
	one, two, three := topology.RolloutPolicyKey("team", "one"), topology.RolloutPolicyKey("team", "two"), topology.RolloutPolicyKey("team", "three")
	p.Read(one, "v/1", ProbeRequest{Pods: pods})
	g.Eventually(slow.inFlight.Load).Should(Equal(int32(DefaultPerPolicy)))
	p.Read(two, "v/1", ProbeRequest{Pods: pods})
	p.Read(three, "v/1", ProbeRequest{Pods: pods})
	g.Eventually(slow.inFlight.Load).Should(Equal(int32(DefaultPerNamespace)))
	g.Consistently(slow.mostSeen.Load, 200*time.Millisecond).Should(Equal(int32(DefaultPerNamespace)))
	close(slow.hold)
}

// TestProberBacksOffAFailingPod: a pod whose read failed is read again
// only after sweeps that double with each failure.
func TestProberBacksOffAFailingPod(t *testing.T) {
	g := NewWithT(t)
	p := &Prober{Interval: time.Nanosecond, Outbound: outbound.New(outbound.Client{ReadTimeout: 100 * time.Millisecond})}
	ended := sweeps(t, p)
	policy := topology.RolloutPolicyKey("team", "p")
	hole := blackHole(t)
	var hits atomic.Int32
	counter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer counter.Close()
	req := ProbeRequest{Pods: []ProbePod{{UID: "hole", Address: hole}, {UID: "failing", Address: strings.TrimPrefix(counter.URL, "http://")}}}
	for range 8 {
		p.Read(policy, "v/1", req)
		g.Eventually(ended).Should(Receive(Equal(policy)))
	}
	got := p.Read(policy, "v/1", req)
	g.Expect(got.Pods["hole"].Err).To(Equal("no answer within 100ms"))
	g.Expect(got.Pods["failing"]).To(Equal(PodReading{Errors: -1, Err: "answered 500"}))
	// Failures 1, 2, 3 skip 0, 1, 3 sweeps: sweeps 1, 2, 4 and 8 read it.
	g.Expect(hits.Load()).To(Equal(int32(4)))
}

// running tells whether a sweep of policy is under way.
func (p *Prober) running(policy topology.Key) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.policies[policy]
	return st != nil && st.running
}
