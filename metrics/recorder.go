package metrics

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flagplane/flagplane/controllers"
	"github.com/flagplane/flagplane/topology"
)

const namespace = "flagplane"

var _ controllers.Metrics = (*Recorder)(nil)

// Recorder records flagplane's metrics. Its methods are safe for concurrent
// use; a nil *Recorder records nothing.
type Recorder struct {
	events         *prometheus.CounterVec
	deltaSize      prometheus.Histogram
	deltaKeys      *prometheus.CounterVec
	reconcileTime  *prometheus.HistogramVec
	reconcileErrs  *prometheus.CounterVec
	writes         *prometheus.CounterVec
	nodes          *prometheus.GaugeVec
	subscribers    *prometheus.GaugeVec
	subscriptions  *prometheus.CounterVec
	streamEnds     *prometheus.CounterVec
	refusals       *prometheus.CounterVec
	tokenReviews   *prometheus.CounterVec
	delivered      *prometheus.HistogramVec
	apiRequests    *APIRequests
	pending        *prometheus.Desc
	topologyMu     sync.Mutex
	topologyCounts func() map[topology.Kind]int
	pendingKeys    func() int
}

// New creates a Recorder and registers its metrics on reg.
func New(reg prometheus.Registerer) (*Recorder, error) {
	r := &Recorder{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "events_total",
			Help: "Informer events handled, by kind and event type (created, spec-changed, targets-changed, labels-changed, deleted, ...).",
		}, []string{"kind", "event"}),
		deltaSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "delta_size",
			Help:    "Nodes named by the Delta of one non-empty topology edit: what one event costs downstream.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096},
		}),
		deltaKeys: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "delta_keys_total",
			Help: "Keys enqueued from topology Deltas, by the output they recompute (configmap, workload, source, flagset, inprocessconfig, flagd, sourcepolicy).",
		}, []string{"output"}),
		reconcileTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "reconcile_duration_seconds",
			Help:    "Time to reconcile one key, by workflow (configmaps, status, workloads) and result (success, error).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"workflow", "result"}),
		reconcileErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "reconcile_errors_total",
			Help: "Failed reconciliations, by workflow; they are retried with backoff.",
		}, []string{"workflow"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "writes_total",
			Help: "Writes to the API server, by what is written (ConfigMap, status, RBAC) and verb (create, apply, update, delete, status). Unchanged content is not written.",
		}, []string{"kind", "verb"}),
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "topology_nodes",
			Help: "Nodes in the topology graph, by kind.",
		}, []string{"kind"}),
		subscribers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "sync_subscribers",
			Help: "Open flagd sync streams on the built-in sync server, by flag set selector.",
		}, []string{"selector"}),
		subscriptions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "sync_subscriptions_total",
			Help: "flagd sync streams opened on the built-in sync server, by flag set selector.",
		}, []string{"selector"}),
		streamEnds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "sync_stream_ends_total",
			Help: "flagd sync streams ended on the built-in sync server, by reason (left, shutdown, credential_expired, permission_denied, send_failed).",
		}, []string{"reason"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "sync_refusals_total",
			Help: "Calls the built-in sync server refused before serving them, by gRPC status code (Unauthenticated, PermissionDenied, InvalidArgument, Unavailable).",
		}, []string{"code"}),
		tokenReviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "sync_token_reviews_total",
			Help: "Service-account tokens presented to the built-in sync server, by how they were checked: reviewed (a TokenReview was made), cached and cached_refusal (an earlier review's answer), shared (a concurrent review of the same token), limited (refused by the TokenReview rate limit), rejected (refused by its form without a review).",
		}, []string{"result"}),
		delivered: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "edit_delivered_seconds",
			Help: "From a FeatureFlag edit reaching the manager (its informer event) to its content being handed on, by path: " +
				"configmap (a generated ConfigMap holding it, seen by the manager's watch; once per ConfigMap), " +
				"sync (the sync server offering it to the streams of the flag set). The kubelet's projection into a running pod is not seen.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"path"}),
		apiRequests: NewAPIRequests(),
		pending: prometheus.NewDesc(namespace+"_pending_keys",
			"Keys of the workflow queues that wait, are being reconciled or wait for a retry: 0 when the manager has nothing left to do.", nil, nil),
	}
	var errs []error
	for _, c := range r.collectors() {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("registering flagplane's metrics: %w", err)
	}
	return r, nil
}

// APIRequests counts the requests to the API server of the clients whose
// rest.Config it wraps (flagplane_api_requests_total); nil for a nil Recorder.
func (r *Recorder) APIRequests() *APIRequests {
	if r == nil {
		return nil
	}
	return r.apiRequests
}

// Event counts one informer event.
func (r *Recorder) Event(kind, event string) {
	if r == nil {
		return
	}
	r.events.WithLabelValues(kind, event).Inc()
}

// Delta records the size of the delta of one topology edit.
func (r *Recorder) Delta(d topology.Delta) {
	if r == nil || d.Empty() {
		return
	}
	r.deltaSize.Observe(float64(d.Size()))
	counts := map[string]int{}
	for k := range d.All() {
		counts[deltaOutput(k.Kind)]++
	}
	for output, n := range counts {
		r.deltaKeys.WithLabelValues(output).Add(float64(n))
	}
}

// deltaOutputs are the output labels that differ from the kind in lower
// case, as they were first published.
var deltaOutputs = map[topology.Kind]string{
	topology.KindFlagSet:         "flagset",
	topology.KindSource:          "source",
	topology.KindInProcessConfig: "inprocessconfig",
	topology.KindSourcePolicy:    "sourcepolicy",
}

// deltaOutput is the output label of a Delta key's kind: "workload" for
// every workload kind, deltaOutputs', else the kind in lower case
// ("configmap", "flagd").
func deltaOutput(kind topology.Kind) string {
	if kind.IsWorkload() {
		return "workload"
	}
	if out, ok := deltaOutputs[kind]; ok {
		return out
	}
	return strings.ToLower(string(kind))
}

// Reconciled records the duration and outcome of reconciling one key.
func (r *Recorder) Reconciled(workflow string, d time.Duration, err error) {
	if r == nil {
		return
	}
	result := "success"
	if err != nil {
		result = "error"
		r.reconcileErrs.WithLabelValues(workflow).Inc()
	}
	r.reconcileTime.WithLabelValues(workflow, result).Observe(d.Seconds())
}

// Write counts one write to the API server.
func (r *Recorder) Write(kind, verb string) {
	if r == nil {
		return
	}
	r.writes.WithLabelValues(kind, verb).Inc()
}

// WatchTopology makes the topology_nodes gauge read counts, usually
// (*topology.Topology).Snapshot().Counts, at every scrape. Reading at scrape
// time costs nothing per event and is never stale.
func (r *Recorder) WatchTopology(counts func() map[topology.Kind]int) {
	if r == nil {
		return
	}
	r.topologyMu.Lock()
	defer r.topologyMu.Unlock()
	r.topologyCounts = counts
}

// WatchPending makes flagplane_pending_keys read pending, usually
// (*controllers.Controller).Pending, at every scrape.
func (r *Recorder) WatchPending(pending func() int) {
	if r == nil {
		return
	}
	r.topologyMu.Lock()
	defer r.topologyMu.Unlock()
	r.pendingKeys = pending
}

// EditDelivered records how long a FeatureFlag edit took to be handed on
// by path (configmap, sync).
func (r *Recorder) EditDelivered(path string, d time.Duration) {
	if r == nil {
		return
	}
	r.delivered.WithLabelValues(path).Observe(d.Seconds())
}

// SyncPushed implements syncserver's Observer: the sync server offered a
// flag set's new content to its streams d after the change reached it.
func (r *Recorder) SyncPushed(d time.Duration) { r.EditDelivered("sync", d) }

// SyncSubscribed records a flagd sync stream opened for a flag set selector
// on the built-in sync server; call SyncUnsubscribed when it closes.
func (r *Recorder) SyncSubscribed(selector string) {
	if r == nil {
		return
	}
	r.subscribers.WithLabelValues(selector).Inc()
	r.subscriptions.WithLabelValues(selector).Inc()
}

// SyncUnsubscribed records that a sync stream opened with SyncSubscribed
// ended, and why.
func (r *Recorder) SyncUnsubscribed(selector, reason string) {
	if r == nil {
		return
	}
	r.subscribers.WithLabelValues(selector).Dec()
	r.streamEnds.WithLabelValues(reason).Inc()
}

// SyncRefused records a sync call refused before it was served, by its gRPC
// status code.
func (r *Recorder) SyncRefused(code string) {
	if r == nil {
		return
	}
	r.refusals.WithLabelValues(code).Inc()
}

// SyncTokenReview records how the sync server checked a service-account
// token: one of the syncserver.Review* results.
func (r *Recorder) SyncTokenReview(result string) {
	if r == nil {
		return
	}
	r.tokenReviews.WithLabelValues(result).Inc()
}

// topologyCollector reports the topology's node counts when scraped.
type topologyCollector struct{ r *Recorder }

func (c topologyCollector) Describe(ch chan<- *prometheus.Desc) { c.r.nodes.Describe(ch) }

func (c topologyCollector) Collect(ch chan<- prometheus.Metric) {
	c.r.topologyMu.Lock()
	counts := c.r.topologyCounts
	c.r.topologyMu.Unlock()
	if counts == nil {
		return
	}
	for kind, n := range counts() {
		c.r.nodes.WithLabelValues(string(kind)).Set(float64(n))
	}
	c.r.nodes.Collect(ch)
}

// pendingCollector reports the pending keys when scraped.
type pendingCollector struct{ r *Recorder }

func (c pendingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.r.pending }

func (c pendingCollector) Collect(ch chan<- prometheus.Metric) {
	c.r.topologyMu.Lock()
	pending := c.r.pendingKeys
	c.r.topologyMu.Unlock()
	if pending == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.r.pending, prometheus.GaugeValue, float64(pending()))
}

// Unregister removes the metrics from reg, so that a process may create
// another Recorder on the same registry (tests, the demo).
func (r *Recorder) Unregister(reg prometheus.Registerer) {
	if r == nil {
		return
	}
	for _, c := range r.collectors() {
		reg.Unregister(c)
	}
}

func (r *Recorder) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		r.events, r.deltaSize, r.deltaKeys, r.reconcileTime, r.reconcileErrs, r.writes,
		topologyCollector{r}, r.subscribers, r.subscriptions, r.streamEnds, r.refusals, r.tokenReviews, r.delivered,
		r.apiRequests, pendingCollector{r},
	}
}
