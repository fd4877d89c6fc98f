package controllers

import (
	"context"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/manifests"
	"github.com/flagplane/flagplane/workflows/status"
)

// +kubebuilder:rbac:groups=policy.flagplane.dev,resources=featureflagsourcepolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.flagplane.dev,resources=featureflagsourcepolicies/status,verbs=get;update;patch

// The kinds table: every kind whose informer feeds the graph or a queue
// is one line of kinds, and nothing else in this package registers an
// informer handler (kinds_test.go). A line of a kind of the graph is a
// graphKind: its informer type, which updates are relevant to the graph
// (the kind's rule in topology/relevance.go, and the event the update
// counts as), how an object enters and leaves the graph, and the queue
// that reconciles the kind's keys when a Delta names them (queueOf). The
// objects flagplane generates (ConfigMaps, RBAC, a Flagd's children), pods
// and the sync servers' reports do not edit the graph's objects the same
// way: their lines are watchedKinds, with a handler of their own
// (registrar.go has both types).

// kinds is the table: the kinds of the graph, then the others. Adding a
// kind adds its line to one of the two (and its topology file, its
// workflow); docs/architecture.md, "Adding a new kind".
func (c *Controller) kinds(mgr manager.Manager) []registrar {
	return slices.Concat(c.graphKinds(mgr), c.watchedKinds(mgr))
}

// graphKinds are the lines of the kinds of the graph.
func (c *Controller) graphKinds(mgr manager.Manager) []registrar {
	return []registrar{
		graphKind[*v1beta1.FeatureFlag]{
			object: &v1beta1.FeatureFlag{}, name: v1beta1.FeatureFlagKind, queue: c.statuses, status: (*status.Updater).UpdateFlagSet,
			change: relevant(topology.FlagSetChanged, "spec-changed"),
			upsert: (*topology.Topology).UpsertFlagSet, remove: byName[*v1beta1.FeatureFlag]((*topology.Topology).DeleteFlagSet),
			// Edit-to-delivery times start at the informer event.
			edited:  c.edits.edited,
			deleted: func(ff *v1beta1.FeatureFlag) { c.edits.forget(topology.FlagSetKey(ff.Namespace, ff.Name)) },
			ignored: c.flagSetMetadataChanged,
		},
		graphKind[*v1beta1.FeatureFlagSource]{
			object: &v1beta1.FeatureFlagSource{}, name: v1beta1.FeatureFlagSourceKind, queue: c.statuses, status: (*status.Updater).UpdateSource,
			change: sourceChange,
			upsert: (*topology.Topology).UpsertSource, remove: byName[*v1beta1.FeatureFlagSource]((*topology.Topology).DeleteSource),
		},
		graphKind[*v1beta1.InProcessConfiguration]{
			object: &v1beta1.InProcessConfiguration{}, name: v1beta1.InProcessConfigurationKind, queue: c.statuses, status: (*status.Updater).UpdateInProcessConfig,
			change: relevant(topology.InProcessConfigChanged, "spec-changed"),
			upsert: (*topology.Topology).UpsertInProcessConfig, remove: byName[*v1beta1.InProcessConfiguration]((*topology.Topology).DeleteInProcessConfig),
		},
		graphKind[*policyv1alpha1.FeatureFlagSourcePolicy]{
			object: &policyv1alpha1.FeatureFlagSourcePolicy{}, name: policyv1alpha1.FeatureFlagSourcePolicyKind, queue: c.statuses, status: (*status.Updater).UpdateSourcePolicy,
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
			upsert: upsertGrant, remove: byName[*unstructured.Unstructured]((*topology.Topology).DeleteGrant),
			// Its CRD may be installed after the manager starts.
			from: func(ctx context.Context, add addFunc[*unstructured.Unstructured]) error {
				return c.grantsFrom(ctx, mgr, add)
			},
		},
		// Staged rollouts (rollouts.go).
		graphKind[*deliveryv1alpha1.FeatureFlagRolloutPolicy]{
			object: &deliveryv1alpha1.FeatureFlagRolloutPolicy{}, name: deliveryv1alpha1.FeatureFlagRolloutPolicyKind, queue: c.rollouts,
			change: rolloutPolicyChange,
			upsert: (*topology.Topology).UpsertRolloutPolicy, remove: byName[*deliveryv1alpha1.FeatureFlagRolloutPolicy]((*topology.Topology).DeleteRolloutPolicy),
			// A promotion or an abort changes no plan: the policy is looked at again.
			edited: c.rolloutPolicyEdited, deleted: c.historyOfPolicy, ignored: newOf(c.historyOfPolicy),
		},
		graphKind[*deliveryv1alpha1.FeatureFlagRevision]{
			object: &deliveryv1alpha1.FeatureFlagRevision{}, name: deliveryv1alpha1.FeatureFlagRevisionKind,
			change: func(_, _ *deliveryv1alpha1.FeatureFlagRevision) string { return "" }, // immutable
			upsert: upsertRevision, remove: deleteRevision,
			edited: c.historyOfRevision, deleted: c.historyOfRevision, ignored: newOf(c.historyOfRevision),
		},
		graphKind[*corev1.Namespace]{
			object: &corev1.Namespace{}, name: "Namespace",
			// A namespaced install cannot read Namespaces: its namespace
			// selectors match no namespace (docs/delivery.md).
			clusterScoped: true,
			change:        namespaceChange, upsert: upsertNamespace, remove: deleteNamespace,
		},
	}
}

// watchedKinds are the lines of the kinds that feed a queue or a lookup
// without editing the graph's objects.
func (c *Controller) watchedKinds(mgr manager.Manager) []registrar {
	return []registrar{
		// What flagplane generates (generated_callbacks.go).
		watchedKind[*corev1.ConfigMap]{object: &corev1.ConfigMap{}, name: "ConfigMap", handler: c.configMapHandler()},
		watchedKind[*rbacv1.Role]{object: &rbacv1.Role{}, name: "Role", handler: rbacHandler[*rbacv1.Role](c)},
		watchedKind[*rbacv1.RoleBinding]{object: &rbacv1.RoleBinding{}, name: "RoleBinding", handler: rbacHandler[*rbacv1.RoleBinding](c)},
		// What is generated for a Flagd (flagd_callbacks.go).
		watchedKind[client.Object]{object: &appsv1.Deployment{}, name: "Deployment", handler: c.flagdChildHandler()},
		watchedKind[client.Object]{object: &corev1.Service{}, name: "Service", handler: c.flagdChildHandler()},
		watchedKind[client.Object]{object: &networkingv1.Ingress{}, name: "Ingress", handler: c.flagdChildHandler()},
		watchedKind[*unstructured.Unstructured]{
			name: "HTTPRoute", handler: c.flagdRouteHandler(),
			// A cache of its own, from the moment its CRD is installed.
			from: func(ctx context.Context, add addFunc[*unstructured.Unstructured]) error {
				return c.routesFrom(ctx, mgr, add)
			},
		},

		// Pods (pod_callbacks.go), resolved to their workload through
		// ReplicaSets and Jobs, of which the owner references are all
		// that is read: their informers have no handler.
		watchedKind[*metav1.PartialObjectMetadata]{object: metadataOf(appsv1.SchemeGroupVersion.WithKind("ReplicaSet")), name: "ReplicaSet"},
		watchedKind[*metav1.PartialObjectMetadata]{object: metadataOf(batchv1.SchemeGroupVersion.WithKind("Job")), name: "Job"},
		watchedKind[*corev1.Pod]{object: &corev1.Pod{}, name: "Pod", handler: c.podHandler()},

		// The sync servers' reports, in a cache of their own
		// (syncreport_callbacks.go).
		watchedKind[*corev1.ConfigMap]{
			name: "SyncReport", handler: c.syncReportHandler(c.opts.SyncReportNamespace),
			from: func(ctx context.Context, add addFunc[*corev1.ConfigMap]) error {
				return c.syncReportsFrom(ctx, mgr, add)
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

// newOf adapts a function of an object to the updates of it.
func newOf[T any](fn func(T)) func(old, new T) {
	return func(_, new T) { fn(new) }
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

func upsertGrant(t *topology.Topology, u *unstructured.Unstructured) (topology.Delta, error) {
	return t.UpsertGrant(manifests.GrantFromReferenceGrant(u))
}

func upsertRevision(t *topology.Topology, r *deliveryv1alpha1.FeatureFlagRevision) (topology.Delta, error) {
	return t.UpsertRevision(r), nil
}

func deleteRevision(t *topology.Topology, r *deliveryv1alpha1.FeatureFlagRevision) topology.Delta {
	return t.DeleteRevision(r.Namespace, r.Name, r.Spec.FlagSet, r.Spec.Revision)
}

func upsertNamespace(t *topology.Topology, ns *corev1.Namespace) (topology.Delta, error) {
	return t.UpsertNamespace(ns.Name, ns.Labels), nil
}

func deleteNamespace(t *topology.Topology, ns *corev1.Namespace) topology.Delta {
	return t.DeleteNamespace(ns.Name)
}

// rolloutPolicyChange: what a FeatureFlagRolloutPolicy update changed.
func rolloutPolicyChange(old, new *deliveryv1alpha1.FeatureFlagRolloutPolicy) string {
	// Its annotations hold promotions and aborts.
	if topology.RolloutPolicyChanged(old, new) || !maps.Equal(old.Annotations, new.Annotations) {
		return "changed"
	}
	return ""
}

// namespaceChange: a Namespace's labels, which rollout steps select by.
func namespaceChange(old, new *corev1.Namespace) string {
	if maps.Equal(old.Labels, new.Labels) {
		return ""
	}
	return "labels-changed"
}

// metadataOf is the metadata-only object of gvk, for an informer of
// owner references.
func metadataOf(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(gvk)
	return meta
}
