package configmaps

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// Reconciler makes one generated ConfigMap what the graph wants:
// created or updated with server-side apply, deleted when no workload needs
// it, restored when someone deletes or edits it.
type Reconciler struct {
	// Client reads from the informer cache and writes to the API server.
	Client client.Client
	// Settings are the operator's: how flag sets are validated, what
	// generated objects carry.
	Settings workflows.Settings
	// Writes counts the requests that changed the cluster, by verb.
	Writes func(verb string)
	// Events receives a Warning on the FeatureFlag when its ConfigMap cannot be written.
	Events events.EventRecorder
	// Live reads from the API server, when a ConfigMap to create exists
	// already (the cache holds managed ConfigMaps only).
	Live client.Reader
	// Failures remembers failed writes for status; nil remembers nothing.
	Failures *workflows.WriteFailures
	// Unseen remembers the writes whose informer event has not arrived
	// yet, for status; nil remembers nothing.
	Unseen *workflows.UnseenWrites
	// UnneededGrace keeps a new ConfigMap that no workload needs for this
	// long (UnneededGrace once the graph is live; zero deletes at once, as
	// at start-up, when the graph has seen every pod).
	UnneededGrace time.Duration
}

// Reconcile brings the ConfigMap namespace/name in line with the graph. It
// makes no request when the cluster already holds the desired content.
//
// The logger of ctx names the ConfigMap (its caller's, see
// workflows.LogKey); Reconcile adds its FeatureFlag.
func (r *Reconciler) Reconcile(ctx context.Context, v *topology.View, namespace, name string) error {
	logger := log.FromContext(ctx)
	current := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, current)
	switch {
	case apierrors.IsNotFound(err):
		current = nil
	case err != nil:
		return fmt.Errorf("reading ConfigMap %s/%s from the cache: %w", namespace, name, err)
	}

	gen := r.Settings.Generated
	key, needed := v.ConfigMapByName(namespace, name)
	if !needed {
		// Only a name flagplane generates: the informer holds every
		// ConfigMap labelled with the managed-by value, which another tool
		// may use too (the OpenFeature Operator's, when it is configured).
		if current == nil || !gen.Owns(current.Labels) || !topology.IsConfigMapName(name) {
			return nil
		}
		if age := time.Since(current.CreationTimestamp.Time); age < r.UnneededGrace {
			return workflows.RequeueAfter(r.UnneededGrace - age)
		}
		logger.Info("deleting ConfigMap no workload needs")
		err := r.Client.Delete(ctx, current, client.Preconditions{UID: &current.UID})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting ConfigMap %s/%s: %w", namespace, name, err)
		}
		r.count("delete")
		return nil
	}
	fs := key.FlagSet()
	logger = logger.WithValues("FeatureFlag", klog.KRef(fs.Namespace, fs.Name))

	facts := v.ConfigMapFacts(key)
	desired, err := Build(facts, r.Settings)
	if why := kept(err); why != nil {
		// The flag set is invalid, or too large for a ConfigMap (a write
		// the API server refuses is not made). The status of the
		// FeatureFlag and its sources says why; the ConfigMap keeps its
		// last valid content. Retrying cannot help until the flag set
		// changes.
		if current != nil {
			logger.V(1).Info("keeping last valid content of ConfigMap", "reason", why.Error())
			return nil
		}
		// A namespace that starts consuming the flag set now gets the last
		// valid content from another namespace's copy, so that its pods
		// never mount a ConfigMap that does not exist.
		desired = r.lastValidCopy(ctx, facts)
		if desired == nil {
			logger.Info("not creating ConfigMap: the flag set has no content it can hold yet", "reason", why.Error())
			return nil
		}
	} else if err != nil {
		return err
	}
	if desired == nil || upToDate(current, desired) {
		r.Failures.Record(workflows.ObjectRef{Kind: "ConfigMap", Namespace: namespace, Name: name}, nil)
		return nil
	}
	if current == nil {
		err = workflows.CreateOwned(ctx, r.Client, r.Live, gen, desired.DeepCopy(), corev1.SchemeGroupVersion.WithKind("ConfigMap"), func() error { return r.apply(ctx, desired) })
		if err == nil {
			r.count("create")
		}
	} else {
		err = r.apply(ctx, desired)
	}
	ref := workflows.ObjectRef{Kind: "ConfigMap", Namespace: namespace, Name: name}
	if err != nil {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			// The namespace is going away, and its workloads with it.
			return nil
		}
		// The Event and the status say which ConfigMap and what the API
		// server answered, in the same words.
		err = workflows.WriteFailed(ref, err)
		if r.Failures.Record(ref, err) && facts.FlagSet != nil {
			workflows.Warn(r.Events, facts.FlagSet, workflows.EventApplyFailed, workflows.ActionApply, "%v", err)
		}
		return err
	}
	r.Failures.Record(ref, nil)
	replaced := ""
	if current != nil {
		replaced = current.ResourceVersion
	}
	r.Unseen.Wrote(ref, replaced)
	if current != nil {
		if err := r.removeForeignKeys(ctx, current, desired); err != nil {
			return err
		}
	}
	logger.Info("applied ConfigMap", "created", current == nil)
	return nil
}

func (r *Reconciler) apply(ctx context.Context, desired *corev1.ConfigMap) error {
	ac := corev1ac.ConfigMap(desired.Name, desired.Namespace).
		WithLabels(desired.Labels).
		WithData(desired.Data)
	if len(desired.Annotations) > 0 {
		ac.WithAnnotations(desired.Annotations)
	}
	for _, owner := range desired.OwnerReferences {
		ac.WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(owner.APIVersion).WithKind(owner.Kind).WithName(owner.Name).WithUID(owner.UID).WithController(*owner.Controller))
	}
	if err := r.Client.Apply(ctx, ac, client.FieldOwner(v1beta1.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying ConfigMap %s/%s: %w", desired.Namespace, desired.Name, err)
	}
	r.count("apply")
	return nil
}

// removeForeignKeys drops data keys that someone else added: server-side
// apply leaves fields of other managers alone, but a flagd sidecar reads the
// whole directory, so a generated ConfigMap must hold exactly the flag set.
func (r *Reconciler) removeForeignKeys(ctx context.Context, current, desired *corev1.ConfigMap) error {
	// The patch is computed from what the cluster holds after the apply, so
	// that it removes the foreign keys only: from current alone, a
	// ConfigMap that held foreign keys only would get "data": null, which
	// drops the flag set just applied too.
	applied := current.DeepCopy()
	if applied.Data == nil {
		applied.Data = map[string]string{}
	}
	maps.Copy(applied.Data, desired.Data)
	patch := client.MergeFrom(applied)
	updated := applied.DeepCopy()
	changed := false
	for k := range updated.Data {
		if _, ok := desired.Data[k]; !ok {
			delete(updated.Data, k)
			changed = true
		}
	}
	if len(updated.BinaryData) > 0 {
		updated.BinaryData = nil
		changed = true
	}
	if !changed {
		return nil
	}
	if err := r.Client.Patch(ctx, updated, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing foreign data keys from ConfigMap %s/%s: %w", current.Namespace, current.Name, err)
	}
	r.count("patch")
	return nil
}

func (r *Reconciler) count(verb string) {
	if r.Writes != nil {
		r.Writes(verb)
	}
}

// lastValidCopy returns the ConfigMap of facts with the data of an existing
// copy of the same flag set in another namespace (facts.Copies), or nil.
func (r *Reconciler) lastValidCopy(ctx context.Context, facts topology.ConfigMapFacts) *corev1.ConfigMap {
	for _, ns := range facts.Copies() {
		other := &corev1.ConfigMap{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: facts.Name}, other); err != nil {
			continue
		}
		if content, ok := other.Data[facts.DataKey]; ok && r.Settings.Generated.Owns(other.Labels) {
			return object(facts, content, r.Settings)
		}
	}
	return nil
}

// upToDate tells whether the cluster's ConfigMap is exactly what is desired.
// Its labels hold desired's, the managed-by label among them: one adopted
// under another value flagplane owns (OwnedValues) is relabelled.
func upToDate(current, desired *corev1.ConfigMap) bool {
	if current == nil || len(current.BinaryData) > 0 ||
		!workflows.HasAll(current.Labels, desired.Labels) || !workflows.HasAll(current.Annotations, desired.Annotations) {
		return false
	}
	if !equality.Semantic.DeepEqual(current.Data, desired.Data) {
		return false
	}
	for _, want := range desired.OwnerReferences {
		found := false
		for _, have := range current.OwnerReferences {
			if have.UID == want.UID {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// UnneededGrace is how long a new generated ConfigMap that no workload
// needs is kept: the Pod webhook writes one for the first pod of a workload
// that only its pods make known, moments before the pod informer tells the
// graph. (Should the graph take longer, the ConfigMap is deleted and written
// again when it does; the kubelet waits for it meanwhile.)
const UnneededGrace = 5 * time.Second
