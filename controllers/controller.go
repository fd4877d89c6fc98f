package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/configmaps"
	"github.com/flagplane/flagplane/workflows/confirm"
	"github.com/flagplane/flagplane/workflows/flagds"
	"github.com/flagplane/flagplane/workflows/history"
	"github.com/flagplane/flagplane/workflows/rbac"
	"github.com/flagplane/flagplane/workflows/restarts"
	"github.com/flagplane/flagplane/workflows/staging"
	"github.com/flagplane/flagplane/workflows/status"
)

// +kubebuilder:rbac:groups=core.openfeature.dev,resources=featureflags;featureflagsources;inprocessconfigurations,verbs=get;list;watch
// +kubebuilder:rbac:groups=core.openfeature.dev,resources=featureflags/status;featureflagsources/status;inprocessconfigurations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=referencegrants,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Options configure the controllers.
type Options struct {
	// Workers per workflow queue (default 2).
	Workers int
	// Metrics receives counts and timings; nil records nothing.
	Metrics Metrics
	// GrantCRDPoll is how often to look for Gateway API's ReferenceGrant
	// CRD while it is not installed (default 15s), and its HTTPRoute CRD.
	GrantCRDPoll time.Duration
	// Flagd are the settings of the Flagd kind.
	Flagd flagds.Options
	// Settings are the operator-wide inputs of the workflows: the flag-set
	// validator, the metadata of generated objects, the options the webhook
	// injects with. nil is workflows.DefaultSettings. Topology, when set,
	// must have been made with Settings.FlagSets.TopologyOptions.
	Settings *workflows.Settings
	// Namespaces the manager's cache is restricted to (empty: all), for the
	// caches the controllers start themselves (HTTPRoutes).
	Namespaces []string

	// --- sync server hook (issue 7) ---

	// Topology is the graph to maintain; a new one when nil. Set it to share
	// the graph with a reader that exists before the controllers, such as
	// the sync server.
	Topology *topology.Topology
	// FlagSetListener, when set, hears of every flag set whose served
	// content or readers may have changed (a Delta's flag sets), after
	// the edit that changed it. It is called from informer event handlers
	// and must return at once.
	FlagSetListener FlagSetListener
	// SyncReportNamespace, when set, is the manager's own namespace, where
	// every replica's sync server reports its streams: the status of flag
	// sets counts them (see status.SyncReports).
	SyncReportNamespace string
	// PodAddress, when set, is where a container's port of a pod is
	// reached (tests whose pods have no routable IP); nil: the pod's IP.
	// The EvaluationErrors gate reads flagd's metrics there.
	PodAddress func(pod *corev1.Pod, container string, port int32) (string, bool)
	// PrometheusGates evaluates the Prometheus gates of rollout policies
	// (--prometheus-gates); without it a policy naming one is not accepted.
	PrometheusGates bool
	// ConfirmBound is how long a pod may take to serve a revision its copy
	// holds before its FeatureFlag is Stalled (status.DefaultConfirmBound
	// when 0). NoConfirm asks no flagd: delivery is what flagplane wrote.
	ConfirmBound time.Duration
	NoConfirm    bool
	// PrometheusNamespaceLabel is the label of a series' namespace that
	// Prometheus gates' queries are confined by (default "namespace").
	PrometheusNamespaceLabel string
	// GateInterval is how often the gates of a rollout under way are read
	// (staging.DefaultInterval when 0).
	GateInterval time.Duration
	// Unrecorded, when set, is where the revision history
	// (workflows/history) says which FeatureFlags' accepted specs it did
	// not record, and why: their status says it (RevisionRecorded), and a
	// change puts them on the status queue.
	Unrecorded *workflows.UnrecordedRevisions
	// History, when set, records every accepted FeatureFlag spec as a
	// revision (workflows/history), on the history queue: fed by the
	// Deltas' flag sets, and by the events of FeatureFlags, revisions and
	// rollout policies that concern the history and not the graph
	// (history.go). Its Graph must be Topology.
	History *history.Reconciler
	// StartedUp, when set, is called once the start-up pass is over (every
	// generated object and every status reconciled once), before the
	// queues serve events: the manager gives the pass's garbage back to
	// the operating system there.
	StartedUp func()
}

// FlagSetListener is told which flag sets an edit of the graph may have
// changed; syncserver.Server is one.
type FlagSetListener interface {
	FlagSetsChanged(flagSets []topology.Key)
}

// --- end sync server hook ---

// Metrics is what the controllers report; issue-specific implementations
// (Prometheus) live with the manager.
type Metrics interface {
	Event(kind, event string)
	Delta(d topology.Delta)
	Reconciled(workflow string, d time.Duration, err error)
	Write(kind, verb string)
	// EditDelivered records how long a FeatureFlag edit took to reach a
	// consumer, by path ("configmap").
	EditDelivered(path string, d time.Duration)
}

// Controller owns the topology and the workflow queues.
type Controller struct {
	topo *topology.Topology
	// log is the logger of the controllers, from the context of New.
	log    logr.Logger
	client client.Client
	cache  cache.Cache
	opts   Options

	// edits remembers, per flag set, its last edit, until each of its
	// generated ConfigMaps was seen holding it (edit → delivered).
	edits edits

	configMaps *workQueue[client.ObjectKey]
	statuses   *workQueue[topology.Key]
	workloads  *workQueue[topology.Key]
	// heal is the healer's queue (healer.go; nil until AddHealer).
	heal *healing
	// history records accepted specs (history.go; nil without Options.History).
	history *workQueue[topology.Key]
	// rollouts moves FeatureFlagRolloutPolicies through their steps (rollouts.go).
	rollouts  *workQueue[topology.Key]
	stagingWF *staging.Reconciler
	events    events.EventRecorder
	// queues is the queue of each kind of the graph (kinds; queueOf).
	queues map[topology.Kind]*workQueue[topology.Key]
	// statusOf writes the status of each kind on the statuses queue, and
	// statusKinds lists those kinds in the table's order (routing.go).
	statusOf    map[topology.Kind]statusWriter
	statusKinds []topology.Kind

	configMapWF *configmaps.Reconciler
	statusWF    *status.Updater
	rbacWF      *rbac.Reconciler
	rolloutWF   *restarts.Reconciler
	annotWF     *status.AnnotationReporter

	// The Flagd kind (flagd_callbacks.go).
	flagds  *workQueue[topology.Key]
	flagdWF *flagds.Reconciler

	// owners resolves pods to their workloads; podOwners are the workloads
	// known through their pods.
	owners    restarts.Owners
	podOwners podOwners

	// handlers are the registrations the start-up pass waits for, made
	// before registered is set (registrar.go).
	handlers   []toolscache.ResourceEventHandlerRegistration
	registered atomic.Bool
	ready      atomic.Bool
	// workloadListeners hear of the workloads of every Delta.
	workloadListeners []func([]topology.Key)
	// failures are the generated objects whose last write failed, for status.
	failures workflows.WriteFailures
	// syncReports are the sync servers' reports of their streams, for status.
	syncReports status.SyncReports
	// unseen and deliveries: the ConfigMap writes a flag set's status
	// waits for (deliveries.go).
	unseen     workflows.UnseenWrites
	deliveries deliveries
	// confirmer asks the consumers' flagds what they serve (nil with
	// NoConfirm); confirmed puts the flag sets whose pods answered on the
	// status queue.
	confirmer *status.Confirmer
	confirmed *throttle
}

// confirmThrottle is how often at most a flag set's status is computed
// again for its pods' answers.
const confirmThrottle = 250 * time.Millisecond

// CacheOptions restricts the cache to what flagplane needs: generated
// ConfigMaps, Roles and RoleBindings by their managed-by label (the values
// gen owns: GeneratedMetadata.Selector), pods slim (restarts.SlimPod),
// workloads slim and other objects without managedFields unless generated
// (FeatureFlags keep theirs without field sets: cache_transforms.go),
// ReplicaSets and Jobs as metadata only (see New). Use it when building the
// manager, with the Generated of the Settings that New is given.
func CacheOptions(base cache.Options, gen workflows.GeneratedMetadata) cache.Options {
	managed := gen.Selector()
	if base.ByObject == nil {
		base.ByObject = map[client.Object]cache.ByObject{}
	}
	base.ByObject[&corev1.ConfigMap{}] = cache.ByObject{Label: managed}
	base.ByObject[&rbacv1.Role{}] = cache.ByObject{Label: managed}
	base.ByObject[&rbacv1.RoleBinding{}] = cache.ByObject{Label: managed}
	base.ByObject[&corev1.Pod{}] = cache.ByObject{Transform: restarts.SlimPod}
	// Workloads keep what the graph reads of them (cache_transforms.go);
	// every other object loses its managedFields and last-applied record,
	// unless flagplane generated it.
	for _, w := range []client.Object{&appsv1.Deployment{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}} {
		base.ByObject[w] = cache.ByObject{Transform: slimWorkloads(gen)}
	}
	base.DefaultTransform = chain(base.DefaultTransform, slimObjects(gen))
	flagdCacheOptions(base, managed)
	return base
}

// chain runs first (when set), then next.
func chain(first, next toolscache.TransformFunc) toolscache.TransformFunc {
	if first == nil {
		return next
	}
	return func(obj any) (any, error) {
		obj, err := first(obj)
		if err != nil {
			return nil, err
		}
		return next(obj)
	}
}

// New registers the informers, indexes, callbacks and workflow queues with
// mgr. The manager's cache must have been built with CacheOptions.
func New(ctx context.Context, mgr manager.Manager, opts Options) (*Controller, error) {
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.GrantCRDPoll <= 0 {
		opts.GrantCRDPoll = 15 * time.Second
	}
	if opts.Settings == nil {
		s := workflows.DefaultSettings()
		opts.Settings = &s
	}
	settings := *opts.Settings
	// A Flagd's objects carry the operator's metadata like every generated object.
	opts.Flagd.Generated = settings.Generated
	topo := opts.Topology
	if topo == nil {
		topo = topology.New(settings.FlagSets.TopologyOptions()...)
	}
	c := &Controller{
		topo: topo,
		// Every write, status included, under flagplane's field manager:
		// managedFields name flagplane, not the process's user agent.
		client: client.WithFieldOwner(mgr.GetClient(), v1beta1.FieldManager),
		cache:  mgr.GetCache(),
		opts:   opts,
		owners: restarts.Owners{Reader: mgr.GetCache()},
		log:    log.FromContext(ctx).WithName("controllers"),
	}
	writes := func(kind string) func(string) {
		return func(verb string) {
			if c.opts.Metrics != nil {
				c.opts.Metrics.Write(kind, verb)
			}
		}
	}
	c.events = mgr.GetEventRecorder("flagplane")
	c.newWorkflows(mgr, settings, writes)
	c.newQueues()

	// Rollouts (and the healer) compare a workload's pods with what they would get now.
	if err := restarts.IndexPodsByController(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	for _, obj := range []client.Object{&rbacv1.Role{}, &rbacv1.RoleBinding{}} {
		if err := mgr.GetFieldIndexer().IndexField(ctx, obj, rbac.NameIndex, rbac.IndexByName); err != nil {
			return nil, fmt.Errorf("indexing %T by name: %w", obj, err)
		}
	}
	if opts.History != nil {
		if err := history.IndexRevisions(ctx, mgr.GetFieldIndexer()); err != nil {
			return nil, err
		}
	}
	c.setupFlagds(mgr, writes)
	if err := c.registerCallbacks(ctx, mgr); err != nil {
		return nil, err
	}
	// Queued even before the startup pass, as sync reports are.
	opts.Unrecorded.OnChange(c.enqueue)
	if err := mgr.Add(manager.RunnableFunc(c.run)); err != nil {
		return nil, fmt.Errorf("adding the workflows to the manager: %w", err)
	}
	return c, nil
}

// newWorkflows makes the workflows the queues reconcile with, and the
// confirmer of what pods serve (unless Options.NoConfirm).
func (c *Controller) newWorkflows(mgr manager.Manager, settings workflows.Settings, writes func(kind string) func(string)) {
	opts, events := c.opts, c.events
	c.configMapWF = &configmaps.Reconciler{Client: c.client, Settings: settings, Writes: writes("ConfigMap"), Events: events,
		Live: mgr.GetAPIReader(), Failures: &c.failures, Unseen: &c.unseen}
	c.statusWF = &status.Updater{Client: c.client, Settings: settings, Writes: writes("status"), Events: events, Failures: &c.failures,
		SyncReports: &c.syncReports, Deliveries: &c.deliveries, Unrecorded: opts.Unrecorded}
	if !opts.NoConfirm {
		c.confirmer = &status.Confirmer{Reader: c.cache, PodAddress: opts.PodAddress, FlagdSyncPort: opts.Flagd.SyncPort, Bound: opts.ConfirmBound,
			WorkloadOf: func(ctx context.Context, pod *corev1.Pod) (topology.Key, bool) {
				res := c.owners.WorkloadOf(ctx, pod.Namespace, pod)
				return res.Workload, res.OK
			},
			// A pod whose answer changed: its flag sets' status, and their
			// rollouts after it (updateStatus), count it again, a few times
			// a second at most.
			Prober: &confirm.Prober{Notify: func(flagSets []topology.Key) {
				for _, f := range flagSets {
					c.confirmed.Add(f)
				}
			}}}
		c.confirmed = &throttle{window: confirmThrottle, add: c.enqueue, later: func(k topology.Key, d time.Duration) {
			if q := c.queueOf(k); q != nil {
				q.AddAfter(k, d)
			}
		}}
		c.statusWF.Confirmer = c.confirmer
	}
	c.rbacWF = &rbac.Reconciler{Client: c.client, Generated: settings.Generated, Writes: writes("RBAC"), Events: events,
		Live: mgr.GetAPIReader(), Failures: &c.failures}
	c.rolloutWF = &restarts.Reconciler{Client: c.client, Injection: settings.Injection, Events: events, Pods: restarts.WorkloadPods{Reader: c.cache}}
	c.annotWF = &status.AnnotationReporter{Client: c.client, Events: events}
	c.stagingWF = &staging.Reconciler{Reader: c.cache, Writer: c.client, Graph: c.topo, Events: events,
		Observed: func(ctx context.Context) status.Observed { return c.statusWF.Observed(ctx) },
		Owners:   workloadOfPod{owners: c.owners}, PrometheusGates: opts.PrometheusGates, NamespaceLabel: opts.PrometheusNamespaceLabel,
		PodAddress: opts.PodAddress, CacheBehind: cacheBehindDelay,
		Prober: &staging.Prober{Interval: opts.GateInterval, Notify: func(k topology.Key) { c.rollouts.Add(k) }}}
}

// newQueues makes the workflow queues of the nodes and ConfigMaps (the
// flagds queue is the Flagd kind's: setupFlagds).
func (c *Controller) newQueues() {
	opts := c.opts
	c.configMaps = newWorkQueue(c.log, "configmaps", opts.Workers, c.reconcileConfigMap)
	c.statuses = newWorkQueue(c.log, "status", opts.Workers, c.reconcileStatus)
	c.workloads = newWorkQueue(c.log, "workloads", opts.Workers, c.reconcileWorkload)
	c.rollouts = newWorkQueue(c.log, "rollouts", opts.Workers, c.reconcileRollout)
	if opts.History != nil {
		c.history = newWorkQueue(c.log, "history", opts.Workers, c.reconcileHistory)
	}
	c.deliveries.track(c.configMaps, &c.unseen, c.cachedConfigMapVersion, c.enqueue)
	if opts.Metrics != nil {
		c.configMaps.observe = opts.Metrics.Reconciled
		c.statuses.observe = opts.Metrics.Reconciled
		c.workloads.observe = opts.Metrics.Reconciled
		if c.history != nil {
			c.history.observe = opts.Metrics.Reconciled
		}
	}
}

// Topology is the graph the controller maintains.
func (c *Controller) Topology() *topology.Topology { return c.topo }

// OnWorkloadsChanged adds fn to what hears, after every edit of the graph,
// the workloads whose injection it may have changed (Delta.Workloads),
// such as the healer, which rolls a workload whose running pods lack an
// injection they now should have. fn is called from informer event handlers
// and must return at once. Call it before the manager starts.
func (c *Controller) OnWorkloadsChanged(fn func(workloads []topology.Key)) {
	c.workloadListeners = append(c.workloadListeners, fn)
}

// ReadyCheck is a healthz.Checker: ready once the graph was built from the
// caches and every generated object (ConfigMaps, RBAC, rollouts, Flagds)
// reconciled once; the statuses are written right after.
func (c *Controller) ReadyCheck(_ *http.Request) error {
	if !c.ready.Load() {
		return errors.New("topology not built yet")
	}
	return nil
}

// Ready tells whether the startup pass has put every generated object in
// place (the statuses may still be being written).
func (c *Controller) Ready() bool { return c.ready.Load() }

// registerCallbacks registers the kinds table (kinds.go): every informer
// handler, and the queue of each kind of the graph.
func (c *Controller) registerCallbacks(ctx context.Context, mgr manager.Manager) error {
	kinds := c.kinds(mgr)
	if err := c.route(kinds); err != nil {
		return err
	}
	for _, k := range kinds {
		if err := k.register(ctx, c); err != nil {
			return err
		}
	}
	// Handlers added later (a CRD installed after the start) are not
	// waited for by the start-up pass.
	c.registered.Store(true)
	return nil
}

// dispatch puts the keys of a delta on the queues of the workflows that
// own them (queueOf), and tells the listeners.
func (c *Controller) dispatch(d topology.Delta) {
	if d.Empty() {
		return
	}
	if c.opts.Metrics != nil {
		c.opts.Metrics.Delta(d)
	}
	// ConfigMaps first: a flag set's status that finds its ConfigMaps'
	// writes on their way waits for them (deliveries.go).
	for k := range d.All() {
		if k.Kind == topology.KindConfigMap {
			c.configMaps.Add(configMapObjectKey(k))
		}
	}
	for k := range d.All() {
		if k.Kind != topology.KindConfigMap {
			c.enqueue(k)
		}
	}
	// The history records the spec the graph now renders.
	if c.history != nil {
		for _, f := range d.Of(topology.KindFlagSet) {
			c.history.Add(f)
		}
	}
	// Sync server (issue 7): streams of flag sets whose content or readers changed.
	if c.opts.FlagSetListener != nil {
		if flagSets := d.Of(topology.KindFlagSet); len(flagSets) > 0 {
			c.opts.FlagSetListener.FlagSetsChanged(flagSets)
		}
	}
	if len(c.workloadListeners) > 0 {
		if workloads := d.Workloads(); len(workloads) > 0 {
			for _, fn := range c.workloadListeners {
				fn(workloads)
			}
		}
	}
}

func (c *Controller) event(kind, event string) {
	if c.opts.Metrics != nil {
		c.opts.Metrics.Event(kind, event)
	}
}

func configMapObjectKey(k topology.Key) client.ObjectKey {
	return client.ObjectKey{Namespace: k.Namespace, Name: topology.ConfigMapName(k.FlagSet())}
}

func (c *Controller) reconcileConfigMap(ctx context.Context, key client.ObjectKey) error {
	v := c.topo.Snapshot()
	ref := workflows.ObjectRef{Kind: "ConfigMap", Namespace: key.Namespace, Name: key.Name}
	failedBefore := c.failures.Of(ref)
	err := c.configMapWF.Reconcile(ctx, v, key.Namespace, key.Name)
	// The sources of the flag set say in status whether its ConfigMaps
	// could be written; the flag set, whether a write refused for good
	// keeps its revision from a consumer.
	if failedAfter := c.failures.Of(ref); failedAfter != failedBefore {
		if cm, ok := v.ConfigMapByName(key.Namespace, key.Name); ok {
			c.enqueue(cm.FlagSet())
			for _, s := range v.SourcesOfFlagSet(cm.FlagSet()) {
				c.enqueue(s)
			}
		}
	}
	return err
}

func (c *Controller) reconcileStatus(ctx context.Context, key topology.Key) error {
	err := c.updateStatus(ctx, key)
	if errors.Is(err, status.ErrCacheBehind) {
		// Not a failure: the event of our own write is on its way.
		return workflows.RequeueAfter(cacheBehindDelay)
	}
	return err
}

func (c *Controller) updateStatus(ctx context.Context, key topology.Key) error {
	write := c.statusOf[key.Kind]
	if write == nil {
		return nil
	}
	v := c.topo.Snapshot()
	if key.Kind == topology.KindFlagSet {
		// What its consumers serve may have moved a rollout's step.
		defer c.enqueueRolloutsOf(v, key)
	}
	return write(c.statusWF, ctx, v, key)
}

func (c *Controller) reconcileWorkload(ctx context.Context, key topology.Key) error {
	if c.queueOf(key) != c.workloads {
		// Reconciling it here would make a second writer of its status (routing.go).
		return reconcile.TerminalError(fmt.Errorf("reconciling %s on the workloads queue: %w", key, errNotThisQueue))
	}
	v := c.topo.Snapshot()
	c.annotWF.Report(ctx, v, key)
	failedBefore := c.failures.Count()
	rbacErr := c.rbacWF.Reconcile(ctx, v, key)
	// Whether a workload's RBAC could be written decides whether its
	// sources are Programmed. (Its graph changes reach them through the
	// Delta, and the Roles it writes through their informer events.)
	if c.failures.Count() != failedBefore || rbacErr != nil {
		for _, s := range v.SourcesOfWorkload(key) {
			c.enqueue(s)
		}
	}
	return errors.Join(rbacErr, c.rolloutWF.Reconcile(ctx, v, key))
}
