package staging

import (
	"context"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/outbound"
)

// The gates that read outside answers (EvaluationErrors: flagd's metrics on
// each pod; Prometheus: a query) never make a reconcile wait. A Prober
// reads them in the background, one sweep at a time per policy, and a
// reconcile takes what the last sweeps found (Prober.Read). A sweep's cost
// is charged to the policy that asks for it, and to the namespace it is in
// (its tenant):
//
//   - each read is bounded in time and bytes (Outbound);
//   - a policy's sweep reads at most PerPolicy pods at once, and all the
//     policies of a namespace at most PerNamespace;
//   - a pod whose read failed is read again only after a backoff that
//     doubles with each failure (up to MaxBackoff sweeps), so a pod that
//     never answers costs a timeout now and then, not at every sweep;
//   - Prometheus queries are read first in a sweep, then the pods.
//
// So a tenant whose pods never answer slows its own policy's readings, and
// nobody else's: the reconciles of every policy, its own included, go on
// at once with what is known, and another tenant's gate halts its rollout
// as soon as its own sweep reads the failure.

// Defaults of Prober.
const (
	DefaultInterval     = 5 * time.Second
	DefaultPerPolicy    = 8
	DefaultPerNamespace = 16
	// MaxBackoff is the most sweeps a pod whose reads failed is skipped.
	MaxBackoff = 12
)

// ProbePod is a pod whose flagd metrics a sweep reads.
type ProbePod struct {
	// UID identifies the pod (its baseline, its backoff).
	UID string
	// Address is host:port of its flagd's management port.
	Address string
}

// ProbeQuery is a Prometheus gate's query.
type ProbeQuery struct {
	// Gate is the gate's index in spec.gates.
	Gate int
	// Address is the Prometheus HTTP API's base URL; Query the query,
	// confined (ConfineQuery).
	Address, Query string
}

// ProbeRequest is what a rollout's gates read: the pods that serve its
// target, and its queries.
type ProbeRequest struct {
	Pods    []ProbePod
	Queries []ProbeQuery
}

// PodReading is what the last read of a pod's flagd found.
type PodReading struct {
	// Errors are the evaluation errors since the rollout first read the
	// pod (its baseline); -1 when the last read failed.
	Errors int64
	// Err says why the last read failed.
	Err string
}

// QueryReading is what the last run of a query found.
type QueryReading struct {
	Value float64
	// Err says why the last run failed ("" when Value holds).
	Err string
}

// Readings are what a Prober knows of a rollout's gates: readings of the
// pods and queries asked for, by pod UID and by query. A pod or query not
// read yet is not in them: unknown.
type Readings struct {
	Pods    map[string]PodReading
	Queries map[ProbeQuery]QueryReading
	// Due is how long until the next sweep may start, when none runs and
	// there is something to read: the caller looks again then. 0 while a
	// sweep runs (its end notifies) or when nothing is to be read.
	Due time.Duration
}

// Prober reads the outside answers of the gates of running rollouts.
type Prober struct {
	// Outbound is the client of every read (outbound.New's defaults when nil).
	Outbound *outbound.Client
	// Interval is how often at most a policy's sweep starts (default 5s).
	Interval time.Duration
	// PerPolicy and PerNamespace bound the reads in flight (defaults 8, 16).
	PerPolicy, PerNamespace int
	// Notify hears of a policy whose sweep ended, so that it is
	// reconciled with what was read; it must return at once.
	Notify func(policy topology.Key)
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	once       sync.Once
	base       context.Context
	log        logr.Logger
	mu         sync.Mutex
	policies   map[topology.Key]*probeState
	namespaces map[string]chan struct{}
}

// probeState is one policy's: the rollout it reads for, its readings and
// the baselines they are counted from.
type probeState struct {
	rollout   string
	running   bool
	lastStart time.Time
	pods      map[string]PodReading
	baselines map[string]int64
	// failures counts a pod's reads that failed in a row; skip, how many
	// sweeps are left before it is read again.
	failures map[string]int
	skip     map[string]int
	queries  map[ProbeQuery]QueryReading
}

func (p *Prober) init() {
	p.once.Do(func() {
		if p.Outbound == nil {
			p.Outbound = outbound.New(outbound.Client{})
		}
		if p.Interval <= 0 {
			p.Interval = DefaultInterval
		}
		if p.PerPolicy <= 0 {
			p.PerPolicy = DefaultPerPolicy
		}
		if p.PerNamespace <= 0 {
			p.PerNamespace = DefaultPerNamespace
		}
		if p.Now == nil {
			p.Now = time.Now
		}
		p.policies = map[topology.Key]*probeState{}
		p.namespaces = map[string]chan struct{}{}
		if p.base == nil {
			p.base = context.Background()
		}
	})
}

// Start gives the Prober the context of the manager's run: sweeps end when
// it does. Call it before the first Read.
func (p *Prober) Start(ctx context.Context) {
	p.base = ctx
	p.log = log.FromContext(ctx).WithName("gates")
	p.init()
}

// Read gives what is known of the gates of policy's rollout (rollout names
// it: readings of another rollout of the policy are dropped, baselines
// with them), and starts a sweep of req in the background when none runs
// and the last started at least Interval ago. It never waits for a read.
func (p *Prober) Read(policy topology.Key, rollout string, req ProbeRequest) Readings {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.policies[policy]
	if st == nil || st.rollout != rollout {
		st = &probeState{rollout: rollout, pods: map[string]PodReading{}, baselines: map[string]int64{},
			failures: map[string]int{}, skip: map[string]int{}, queries: map[ProbeQuery]QueryReading{}}
		p.policies[policy] = st
	}
	out := Readings{Pods: map[string]PodReading{}, Queries: map[ProbeQuery]QueryReading{}}
	for _, pod := range req.Pods {
		if r, ok := st.pods[pod.UID]; ok {
			out.Pods[pod.UID] = r
		}
	}
	for _, q := range req.Queries {
		if r, ok := st.queries[q]; ok {
			out.Queries[q] = r
		}
	}
	asked := len(req.Pods) > 0 || len(req.Queries) > 0
	if !st.running && (st.lastStart.IsZero() || p.Now().Sub(st.lastStart) >= p.Interval) && asked {
		st.running, st.lastStart = true, p.Now()
		go p.sweep(p.base, policy, st, req)
	}
	if !st.running && asked {
		out.Due = max(st.lastStart.Add(p.Interval).Sub(p.Now()), 10*time.Millisecond)
	}
	return out
}

// Forget drops what is known of a policy: it was deleted, or its rollout
// no longer runs. A sweep under way ends without effect.
func (p *Prober) Forget(policy topology.Key) {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.policies, policy)
}

// Policies is how many policies the Prober holds readings of.
func (p *Prober) Policies() int {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.policies)
}

// namespace is the semaphore of a namespace's reads.
func (p *Prober) namespace(ns string) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	sem, ok := p.namespaces[ns]
	if !ok {
		sem = make(chan struct{}, p.PerNamespace)
		p.namespaces[ns] = sem
	}
	return sem
}

// sweep reads a request's queries, then its pods, and stores what it read
// in st unless st was replaced or forgotten meanwhile. ctx is the
// manager's: a sweep under way when it stops reads nothing more.
func (p *Prober) sweep(ctx context.Context, policy topology.Key, st *probeState, req ProbeRequest) {
	began := p.Now()
	slots := newSlots(ctx, p.PerPolicy, p.namespace(policy.Namespace))
	queries := make([]QueryReading, len(req.Queries))
	slots.each(len(req.Queries), func(i int) { queries[i] = p.query(ctx, req.Queries[i]) })
	p.mu.Lock()
	if p.policies[policy] == st {
		for i, q := range req.Queries {
			st.queries[q] = queries[i]
		}
	}
	skipped := st.skipped(req.Pods)
	p.mu.Unlock()

	reads := make([]*podRead, len(req.Pods))
	slots.each(len(req.Pods), func(i int) {
		if skipped[i] {
			return
		}
		n, err := p.metrics(ctx, req.Pods[i].Address)
		reads[i] = &podRead{n: n}
		if err != nil {
			reads[i].err = err.Error()
		}
	})

	p.mu.Lock()
	if p.policies[policy] == st {
		st.store(req, reads)
	}
	st.running = false
	p.mu.Unlock()
	p.logSweep(policy, st.rollout, req, reads, skipped, p.Now().Sub(began))
	if p.Notify != nil {
		p.Notify(policy)
	}
}

// podRead is what one read of a pod's flagd found.
type podRead struct {
	n   int64
	err string
}

// slots bound the reads of a sweep: PerPolicy for its own, and the
// namespace's semaphore for all the sweeps of the namespace.
type slots struct {
	ctx               context.Context
	policy, namespace chan struct{}
}

func newSlots(ctx context.Context, perPolicy int, namespace chan struct{}) *slots {
	return &slots{ctx: ctx, policy: make(chan struct{}, perPolicy), namespace: namespace}
}

// each runs read(i) for i in [0, n), as many at once as the slots allow,
// and returns when they are done; none is started once ctx is done.
func (s *slots) each(n int, read func(int)) {
	var wg sync.WaitGroup
	for i := range n {
		if !s.acquire() {
			break
		}
		wg.Go(func() {
			defer s.release()
			read(i)
		})
	}
	wg.Wait()
}

func (s *slots) acquire() bool {
	select {
	case s.policy <- struct{}{}:
	case <-s.ctx.Done():
		return false
	}
	select {
	case s.namespace <- struct{}{}:
		return true
	case <-s.ctx.Done():
		<-s.policy
		return false
	}
}

func (s *slots) release() { <-s.namespace; <-s.policy }

// skipped says which pods this sweep skips, backing off after failures,
// and counts the skip. Call it with the Prober's lock held.
func (st *probeState) skipped(pods []ProbePod) []bool {
	out := make([]bool, len(pods))
	for i, pod := range pods {
		if st.skip[pod.UID] > 0 {
			st.skip[pod.UID]--
			out[i] = true
		}
	}
	return out
}

// store keeps a sweep's reads: errors counted from each pod's baseline, a
// failure's backoff, and nothing of pods or queries no longer asked for.
// Call it with the Prober's lock held.
func (st *probeState) store(req ProbeRequest, reads []*podRead) {
	for i, pod := range req.Pods {
		r := reads[i]
		switch {
		case r == nil:
			continue // skipped, or the manager stopped
		case r.err != "":
			st.failures[pod.UID]++
			st.skip[pod.UID] = min(1<<min(st.failures[pod.UID]-1, 4)-1, MaxBackoff)
			st.pods[pod.UID] = PodReading{Errors: -1, Err: r.err}
			continue
		}
		delete(st.failures, pod.UID)
		delete(st.skip, pod.UID)
		base, ok := st.baselines[pod.UID]
		if !ok || r.n < base {
			// The first read, or flagd restarted and counts from 0.
			base = r.n
			if ok {
				base = 0
			}
			st.baselines[pod.UID] = base
		}
		st.pods[pod.UID] = PodReading{Errors: r.n - base}
	}
	asked := make(map[string]bool, len(req.Pods))
	for _, pod := range req.Pods {
		asked[pod.UID] = true
	}
	for uid := range st.pods {
		if !asked[uid] {
			delete(st.pods, uid)
			delete(st.baselines, uid)
			delete(st.failures, uid)
			delete(st.skip, uid)
		}
	}
	for q := range st.queries {
		if !containsQuery(req.Queries, q) {
			delete(st.queries, q)
		}
	}
}

// logSweep logs a sweep at V(1).
func (p *Prober) logSweep(policy topology.Key, rollout string, req ProbeRequest, reads []*podRead, skipped []bool, took time.Duration) {
	if !p.log.V(1).Enabled() {
		return
	}
	read, failed, skips := 0, 0, 0
	for i, r := range reads {
		switch {
		case skipped[i]:
			skips++
		case r == nil:
		case r.err != "":
			failed++
		default:
			read++
		}
	}
	p.log.V(1).Info("gates read", "FeatureFlagRolloutPolicy", klog.KRef(policy.Namespace, policy.Name), "rollout", rollout,
		"podsRead", read, "podsFailed", failed, "podsSkipped", skips, "queries", len(req.Queries), "duration", took.String())
}

func containsQuery(qs []ProbeQuery, q ProbeQuery) bool {
	for _, x := range qs {
		if x == q {
			return true
		}
	}
	return false
}

// metrics reads the evaluation errors flagd counted at address.
func (p *Prober) metrics(ctx context.Context, address string) (int64, error) {
	var n int64
	err := p.Outbound.Get(ctx, "http://"+address+"/metrics", func(r io.Reader) error {
		var err error
		n, err = EvaluationErrors(r)
		return err
	})
	return n, err
}

// query runs a Prometheus gate's query.
func (p *Prober) query(ctx context.Context, q ProbeQuery) QueryReading {
	var v float64
	u := strings.TrimSuffix(q.Address, "/") + "/api/v1/query?query=" + url.QueryEscape(q.Query)
	err := p.Outbound.Get(ctx, u, func(r io.Reader) error {
		var err error
		v, err = PrometheusValue(r)
		return err
	})
	if err != nil {
		return QueryReading{Err: err.Error()}
	}
	return QueryReading{Value: v}
}

// PodAddress is host:port of a pod's flagd management port.
func PodAddress(ip string, port int32) string {
	return net.JoinHostPort(ip, strconv.Itoa(int(port)))
}
