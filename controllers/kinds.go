package controllers

import (
	"context"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/manifests"
)

// +kubebuilder:rbac:groups=policy.flagplane.dev,resources=featureflagsourcepolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.flagplane.dev,resources=featureflagsourcepolicies/status,verbs=get;update;patch

// The kinds whose informers edit the graph, each registered once, in
// graphKinds: its informer type, which updates are relevant to the graph
// (the kind's rule in topology/relevance.go, and the event the update
// counts as), how an object enters and leaves the graph, and the queue that
// reconciles the kind's keys when a Delta names them (queueOf). The
// informer events of generated objects (ConfigMaps, RBAC, a Flagd's
// children) and of pods do not edit the graph's objects the same way and
// have their own handlers.

// graphKind is one kind of object whose informer edits the graph.
type graphKind[T client.Object] struct {
	// object is the informer's type.
	object T
	// name is the kind in the events counted (Metrics.Event).
	name string
	// change says what an update of an object with the same UID changed,
	// as the event it counts as, or "" when nothing the graph reads did.
	// A new UID is a re-creation, always relevant.
	change func(old, new T) string
	// upsert and remove edit the graph.
	upsert func(*topology.Topology, T) (topology.Delta, error)
	remove func(*topology.Topology, T) topology.Delta
	// queue reconciles the keys of the kind that a Delta names (nil: none
	// does).
	queue *workQueue[topology.Key]
	// edited and deleted, when set, hear of each created or changed
	// object before the graph does, and of each deleted one.
	edited  func(T)
	deleted func(T)
	// watch, when set, registers the handler itself: for a kind whose CRD
	// may be installed after the manager starts (ReferenceGrant).
	watch func(context.Context, typedHandler[T]) error
}

// registrar is a graphKind of any object type.
type registrar interface {
	register(ctx context.Context, c *Controller) error
	// routes names the queue of the kind's keys, and the kind.
	routes() (*workQueue[topology.Key], topology.Kind)
}

// graphKinds is the table of the kinds whose informers edit the graph.
// Adding a kind adds its line here (and its topology file, its workflow).
func (c *Controller) graphKinds(mgr manager.Manager) []registrar {
	return []registrar{
		graphKind[*v1beta1.FeatureFlag]{
			object: &v1beta1.FeatureFlag{}, name: v1beta1.FeatureFlagKind, queue: c.statuses,
			change: relevant(topology.FlagSetChanged, "spec-changed"),
			upsert: (*topology.Topology).UpsertFlagSet, remove: byName[*v1beta1.FeatureFlag]((*topology.Topology).DeleteFlagSet),
			// Edit-to-delivery times start at the informer event.
			edited:  c.edits.edited,
			deleted: func(ff *v1beta1.FeatureFlag) { c.edits.forget(topology.FlagSetKey(ff.Namespace, ff.Name)) },
		},
		graphKind[*v1beta1.FeatureFlagSource]{
			object: &v1beta1.FeatureFlagSource{}, name: v1beta1.FeatureFlagSourceKind, queue: c.statuses,
			change: sourceChange,
			upsert: (*topology.Topology).UpsertSource, remove: byName[*v1beta1.FeatureFlagSource]((*topology.Topology).DeleteSource),
		},
		graphKind[*v1beta1.InProcessConfiguration]{
			object: &v1beta1.InProcessConfiguration{}, name: v1beta1.InProcessConfigurationKind, queue: c.statuses,
			change: relevant(topology.InProcessConfigChanged, "spec-changed"),
			upsert: (*topology.Topology).UpsertInProcessConfig, remove: byName[*v1beta1.InProcessConfiguration]((*topology.Topology).DeleteInProcessConfig),
		},
		graphKind[*policyv1alpha1.FeatureFlagSourcePolicy]{
			object: &policyv1alpha1.FeatureFlagSourcePolicy{}, name: policyv1alpha1.FeatureFlagSourcePolicyKind, queue: c.statuses,
			change: relevant(topology.SourcePolicyChanged, "spec-changed"),
			upsert: (*topology.Topology).UpsertSourcePolicy, remove: byName[*policyv1alpha1.FeatureFlagSourcePolicy]((*topology.Topology).DeleteSourcePolicy),
		},
		graphKind[*v1beta1.Flagd]{
			object: &v1beta1.Flagd{}, name: v1beta1.FlagdKind, queue: c.flagds,
			change: flagdChange,
			upsert: (*topology.Topology).UpsertFlagd, remove: byName[*v1beta1.Flagd]((*topology.Topology).DeleteFlagd),
		},
		workloadKind(c, &appsv1.Deployment{}, topology.KindDeployment, func(d *appsv1.Deployment) *corev1.PodTemplateSpec { return &d.Spec.Template }),
		workloadKind(c, &appsv1.StatefulSet{}, topology.KindStatefulSet, func(s *appsv1.StatefulSet) *corev1.PodTemplateSpec { return &s.Spec.Template }),
		workloadKind(c, &appsv1.DaemonSet{}, topology.KindDaemonSet, func(d *appsv1.DaemonSet) *corev1.PodTemplateSpec { return &d.Spec.Template }),
		graphKind[*unstructured.Unstructured]{
			name:   ReferenceGrantGroupKind.Kind,
			change: func(_, _ *unstructured.Unstructured) string { return "changed" },
			upsert: func(t *topology.Topology, u *unstructured.Unstructured) (topology.Delta, error) {
				return t.UpsertGrant(manifests.GrantFromReferenceGrant(u))
			},
			remove: byName[*unstructured.Unstructured]((*topology.Topology).DeleteGrant),
			watch: func(ctx context.Context, h typedHandler[*unstructured.Unstructured]) error {
				return c.watchGrants(ctx, mgr, h)
			},
		},
	}
}

// workloadKind registers a workload kind: all of them meet the graph as a
// topology.Workload, and are reconciled on the workloads queue (pod owners
// of other kinds too, which come from their pods: pod_callbacks.go).
func workloadKind[T client.Object](c *Controller, obj T, kind topology.Kind, template func(T) *corev1.PodTemplateSpec) graphKind[T] {
	from := func(obj T) topology.Workload { return topology.WorkloadFrom(kind, obj, template(obj)) }
	return graphKind[T]{
		object: obj, name: string(kind), queue: c.workloads,
		change: func(old, new T) string {
			o, n := from(old), from(new)
			switch {
			case !topology.WorkloadChanged(o, n):
				return "" // status, replicas, a rollout restart: the graph's rule
			case !maps.Equal(o.Labels, n.Labels):
				return "labels-changed" // source selectors may match differently
			case o.ServiceAccountName != n.ServiceAccountName:
				return "serviceaccount-changed" // kubernetes-provider RBAC binds another subject
			}
			return "annotations-changed" // opted in or out, or named other sources
		},
		upsert: func(t *topology.Topology, obj T) (topology.Delta, error) { return t.UpsertWorkload(from(obj)) },
		remove: func(t *topology.Topology, obj T) topology.Delta { return t.DeleteWorkload(from(obj).Key()) },
	}
}

// relevant is the change of a kind whose relevant updates are all one event.
func relevant[T any](changed func(old, new T) bool, event string) func(old, new T) string {
	return func(old, new T) string {
		if changed(old, new) {
			return event
		}
		return ""
	}
}

// byName adapts a topology Delete method to the object deleted.
func byName[T client.Object](del func(*topology.Topology, string, string) topology.Delta) func(*topology.Topology, T) topology.Delta {
	return func(t *topology.Topology, obj T) topology.Delta { return del(t, obj.GetNamespace(), obj.GetName()) }
}

// sourceChange: what a FeatureFlagSource update changed.
func sourceChange(old, new *v1beta1.FeatureFlagSource) string {
	switch {
	case !topology.SourceChanged(old, new):
		return "" // status, resourceVersion, unrelated metadata: the graph's rule
	case !equality.Semantic.DeepEqual(old.Spec.TargetRefs, new.Spec.TargetRefs) ||
		!equality.Semantic.DeepEqual(old.Spec.Selector, new.Spec.Selector):
		return "targets-changed" // the workloads it applies to may differ
	}
	// Sidecar settings (spec, or an annotation the injection reads) or flag sources.
	return "settings-changed"
}

// flagdChange: what a Flagd update changed.
func flagdChange(old, new *v1beta1.Flagd) string {
	switch {
	case !topology.FlagdChanged(old, new):
		return "" // status, labels, resourceVersion: the graph's rule
	case !equality.Semantic.DeepEqual(old.Spec, new.Spec):
		return "spec-changed"
	}
	return "annotations-changed" // the generated Service carries them
}

func (k graphKind[T]) routes() (*workQueue[topology.Key], topology.Kind) {
	return k.queue, topology.Kind(k.name)
}

func (k graphKind[T]) register(ctx context.Context, c *Controller) error {
	h := k.handler(c)
	if k.watch != nil {
		return k.watch(ctx, h)
	}
	return addHandler(ctx, c, k.object, h)
}

// handler turns the kind's informer events into graph edits.
func (k graphKind[T]) handler(c *Controller) typedHandler[T] {
	return typedHandler[T]{
		onAdd: func(obj T) { k.upserted(c, obj, "created") },
		onUpdate: func(old, new T) {
			event := "created"
			if old.GetUID() == new.GetUID() {
				if event = k.change(old, new); event == "" {
					return
				}
			}
			k.upserted(c, new, event)
		},
		onDelete: func(obj T) {
			c.event(k.name, "deleted")
			if k.deleted != nil {
				k.deleted(obj)
			}
			c.dispatch(k.remove(c.topo, obj))
		},
	}
}

func (k graphKind[T]) upserted(c *Controller, obj T, event string) {
	c.event(k.name, event)
	if k.edited != nil {
		k.edited(obj)
	}
	d, err := k.upsert(c.topo, obj)
	if err != nil {
		log.Log.Error(err, "refused by the topology", k.name, obj.GetNamespace()+"/"+obj.GetName())
		return
	}
	c.dispatch(d)
}
