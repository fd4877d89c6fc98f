package flagds

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/rbac"
)

// Reconciler makes a Flagd's generated objects what Desired says
// (server-side apply, field manager flagplane), removes the Ingress and
// HTTPRoute it no longer asks for, keeps the RBAC of its service account,
// and writes its status. It never takes over an object of a generated name
// that flagplane does not manage (workflows.NotManagedError), and it writes
// nothing that is up to date (workflows.FieldsMismatch,
// workflows.OwnsUndesiredFields).
type Reconciler struct {
	// Client reads from the informer cache (Flagds, Deployments, managed
	// Services, Ingresses and ConfigMaps) and writes to the API server.
	Client client.Client
	// Live reads from the API server, when an object to create exists
	// already (the caches hold managed ones only).
	Live client.Reader
	// Options are the operator's settings of the kind.
	Options Options
	// RBAC keeps the Role and RoleBinding of a Flagd's service account.
	RBAC *rbac.Reconciler
	// Writes counts the requests that changed the cluster, by kind and verb.
	Writes func(kind, verb string)
	// Events receives Warnings on the Flagd when a write fails.
	Events events.EventRecorder
	// Failures remembers failed writes for status; nil remembers nothing.
	Failures *workflows.WriteFailures

	routes atomic.Pointer[routeReader]

	mu sync.Mutex
	// replaced holds, per Flagd whose status this reconciler wrote, the
	// resourceVersion that the write replaced, until the cache has moved
	// past it (as status.Updater does).
	replaced map[topology.Key]string
}

// cacheBehindDelay is how long a reconcile whose cache has not seen its own
// last status write waits before it runs again.
const cacheBehindDelay = 50 * time.Millisecond

type routeReader struct{ client.Reader }

// SetRoutes gives the reconciler the reader of managed HTTPRoutes, once
// Gateway API's CRDs are installed; until then an HTTPRoute that a Flagd
// asks for is reported as waiting for them.
func (r *Reconciler) SetRoutes(reader client.Reader) { r.routes.Store(&routeReader{reader}) }

// Reconcile brings the objects and status of a Flagd in line with the
// graph. The logger of ctx names the Flagd (its caller's, see
// workflows.LogKey); a line about one of its objects names that object.
func (r *Reconciler) Reconcile(ctx context.Context, v *topology.View, key topology.Key) error {
	f := &v1beta1.Flagd{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name}, f); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading Flagd %s/%s from the cache: %w", key.Namespace, key.Name, err)
		}
		// Gone: Kubernetes deletes its objects (they are owned by it); its
		// RBAC is in other objects' namespaces, and goes here.
		r.cacheBehind(key, f)
		return r.RBAC.Reconcile(ctx, v, key)
	}
	if r.cacheBehind(key, f) {
		// The status to compare with is gone, and our own write's event
		// changes no spec (nothing else brings the key back): a status
		// written now would be refused with a Conflict. Not a failure.
		return workflows.RequeueAfter(cacheBehindDelay)
	}
	objs := Desired(v, key, r.Options)
	if objs == nil {
		return nil // the graph has not seen it yet: its event follows
	}
	children, applyErr := r.apply(ctx, f, objs)
	rbacErr := r.RBAC.Reconcile(ctx, v, key)
	if rbacErr != nil {
		children.Failed = append(children.Failed, rbacErr.Error())
		children.Permanent = children.Permanent || workflows.PermanentFailure(rbacErr)
	}
	statusErr := r.writeStatus(ctx, f, DesiredStatus(f, objs, children))
	return errors.Join(applyErr, rbacErr, statusErr)
}

// child is one generated object: its desired form (nil: not generated),
// whether it is wanted at all, and where it is read from.
type child struct {
	kind    string
	gvk     schema.GroupVersionKind
	desired *unstructured.Unstructured
	wanted  bool
	// current is an empty object of the kind, to read the cluster's into.
	current client.Object
	reader  client.Reader
}

func (r *Reconciler) apply(ctx context.Context, f *v1beta1.Flagd, objs *Objects) (Children, error) {
	out := Children{InPlace: map[string]bool{}}
	dep := &appsv1.Deployment{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(f), dep); err == nil {
		out.Deployment = dep
	} else if !apierrors.IsNotFound(err) {
		return out, fmt.Errorf("reading Deployment %s/%s from the cache: %w", f.Namespace, f.Name, err)
	}
	if len(objs.Invalid) > 0 || objs.SourceState != topology.RefResolved || objs.Deployment == nil {
		return out, nil // left as they are; the status says why
	}

	var children []child
	// A pod never mounts a ConfigMap that does not exist: the Deployment
	// waits for its ConfigMaps, which the ConfigMap workflow writes.
	var missing []string
	for _, cm := range objs.ConfigMaps {
		name := topology.ConfigMapName(cm.FlagSet())
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cm.Namespace, Name: name}, &corev1.ConfigMap{}); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		out.Pending = append(out.Pending, fmt.Sprintf("Deployment %s waits for ConfigMap(s) %v", f.Name, missing))
	} else {
		children = append(children, child{kind: "Deployment", gvk: appsv1.SchemeGroupVersion.WithKind("Deployment"),
			desired: toUnstructured(objs.Deployment), wanted: true, current: &appsv1.Deployment{}, reader: r.Client})
	}
	children = append(children, child{kind: "Service", gvk: corev1.SchemeGroupVersion.WithKind("Service"),
		desired: toUnstructured(objs.Service), wanted: true, current: &corev1.Service{}, reader: r.Client})
	ingress := child{kind: "Ingress", gvk: networkingv1.SchemeGroupVersion.WithKind("Ingress"),
		wanted: objs.IngressWanted, current: &networkingv1.Ingress{}, reader: r.Client}
	if objs.Ingress != nil {
		ingress.desired = toUnstructured(objs.Ingress)
	}
	children = append(children, ingress)
	if routes := r.routes.Load(); routes != nil {
		route := &unstructured.Unstructured{}
		route.SetGroupVersionKind(HTTPRouteGVK)
		children = append(children, child{kind: "HTTPRoute", gvk: HTTPRouteGVK, desired: objs.HTTPRoute,
			wanted: objs.HTTPRouteWanted, current: route, reader: routes.Reader})
	} else if objs.HTTPRouteWanted {
		out.GatewayAPIMissing = true
	}

	var errs []error
	for _, c := range children {
		ref := workflows.ObjectRef{Kind: c.kind, Namespace: f.Namespace, Name: f.Name}
		inPlace, err := r.ensure(ctx, f, c)
		if err != nil && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return out, nil // the namespace, and the Flagd with it, is going away
		}
		// Which object, and what the API server answered.
		err = workflows.WriteFailed(ref, err)
		if r.Failures.Record(ref, err) && err != nil {
			workflows.Warn(r.Events, f, workflows.EventApplyFailed, workflows.ActionApply, "%v", err)
		}
		switch {
		case err != nil:
			out.Failed = append(out.Failed, err.Error())
			out.Permanent = out.Permanent || workflows.PermanentFailure(err)
			errs = append(errs, err)
		case c.wanted && inPlace:
			out.InPlace[c.kind] = true
		}
	}
	return out, errors.Join(errs...)
}

// ensure makes one child what is desired, or removes it when it is no
// longer wanted; it tells whether the cluster holds it as desired (now
// that a write, if one was needed, succeeded).
func (r *Reconciler) ensure(ctx context.Context, f *v1beta1.Flagd, c child) (bool, error) {
	logger := log.FromContext(ctx)
	key := client.ObjectKeyFromObject(f)
	gen := r.Options.Generated
	err := c.reader.Get(ctx, key, c.current)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("reading %s %s/%s from the cache: %w", c.kind, key.Namespace, key.Name, err)
	}
	if !c.wanted || c.desired == nil {
		if !exists || !gen.Owns(c.current.GetLabels()) || !metav1.IsControlledBy(c.current, f) {
			return false, nil
		}
		logger.Info("deleting what the Flagd no longer asks for", c.kind, klog.KRef(key.Namespace, key.Name))
		uid := c.current.GetUID()
		if err := r.Client.Delete(ctx, c.current, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return false, fmt.Errorf("deleting %s %s/%s: %w", c.kind, key.Namespace, key.Name, err)
		}
		r.count(c.kind, "delete")
		return false, nil
	}
	if !exists {
		// The caches hold managed objects only: ask the API server whether
		// the name is taken before server-side apply creates the object,
		// which would otherwise merge into somebody else's.
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(c.gvk)
		err := r.Live.Get(ctx, key, meta)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return false, fmt.Errorf("reading %s %s/%s, missing from the cache: %w", c.kind, key.Namespace, key.Name, err)
		case !gen.Owns(meta.Labels):
			return false, gen.NotManaged(c.kind, key.Namespace, key.Name)
		}
		if err := r.write(ctx, c); err != nil {
			return false, err
		}
		logger.Info("created", c.kind, klog.KRef(key.Namespace, key.Name))
		return true, nil
	}
	if !gen.Owns(c.current.GetLabels()) {
		return false, gen.NotManaged(c.kind, key.Namespace, key.Name)
	}
	if why := driftOf(c.current, c.desired); why != "" {
		logger.Info("applying", c.kind, klog.KRef(key.Namespace, key.Name), "because", why)
		return true, r.write(ctx, c)
	}
	return true, nil
}

// driftOf says why the cluster's object is not the desired one, or "".
func driftOf(current client.Object, desired *unstructured.Unstructured) string {
	var got map[string]any
	if u, ok := current.(*unstructured.Unstructured); ok {
		got = u.Object
	} else {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(current)
		if err != nil {
			return err.Error()
		}
		got = m
	}
	want := map[string]any{"spec": desired.Object["spec"], "metadata": map[string]any{}}
	wantMeta := want["metadata"].(map[string]any)
	desiredMeta, _ := desired.Object["metadata"].(map[string]any)
	for _, k := range []string{"labels", "annotations", "ownerReferences"} {
		if val, ok := desiredMeta[k]; ok {
			wantMeta[k] = val
		}
	}
	if path := workflows.FieldsMismatch(got, want); path != "" {
		return "field " + path + " differs"
	}
	if path := workflows.OwnsUndesiredFields(current.GetManagedFields(), desired.Object); path != "" {
		return "field " + path + " is no longer desired"
	}
	return ""
}

func (r *Reconciler) write(ctx context.Context, c child) error {
	ac := client.ApplyConfigurationFromUnstructured(c.desired.DeepCopy())
	if err := r.Client.Apply(ctx, ac, client.FieldOwner(v1beta1.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s/%s: %w", c.kind, c.desired.GetNamespace(), c.desired.GetName(), err)
	}
	r.count(c.kind, "apply")
	return nil
}

func (r *Reconciler) count(kind, verb string) {
	if r.Writes != nil {
		r.Writes(kind, verb)
	}
}

func (r *Reconciler) writeStatus(ctx context.Context, f *v1beta1.Flagd, desired v1beta1.FlagdStatus) error {
	if equality.Semantic.DeepEqual(f.Status, desired) {
		return nil
	}
	if c := workflows.TurnedFalse(f.Status.Conditions, desired.Conditions, v1beta1.ConditionResolvedRefs); c != nil {
		workflows.Warn(r.Events, f, workflows.EventUnresolvedRefs, workflows.ActionResolve, "%s", c.Message)
	}
	if c := workflows.TurnedFalse(f.Status.Conditions, desired.Conditions, v1beta1.ConditionAccepted); c != nil {
		workflows.Warn(r.Events, f, workflows.EventInvalidFlagd, workflows.ActionValidate, "%s", c.Message)
	}
	if c := workflows.TurnedFalse(f.Status.Conditions, desired.Conditions, v1beta1.ConditionProgrammed); c != nil && c.Reason == v1beta1.ReasonFlagSetTooLarge {
		workflows.Warn(r.Events, f, v1beta1.ReasonFlagSetTooLarge, workflows.ActionApply, "%s", c.Message)
	}
	if c := workflows.TurnedFalse(f.Status.Conditions, desired.Conditions, v1beta1.ConditionFlagdVersionSupported); c != nil {
		workflows.Warn(r.Events, f, workflows.EventUnsupportedFlagdVersion, workflows.ActionValidate, "%s", c.Message)
	}
	f = f.DeepCopy()
	f.Status = desired
	before := f.ResourceVersion
	err := r.Client.Status().Update(ctx, f)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if apierrors.IsConflict(err) {
		// Someone changed the Flagd after the cached version (a user's
		// edit of its spec): not a failure, since this reconciler is the
		// status's one writer; it goes again once the cache has the change.
		log.FromContext(ctx).V(1).Info("status write raced a change of the Flagd; again once the cache has it")
		return workflows.RequeueAfter(cacheBehindDelay)
	}
	if err != nil {
		return fmt.Errorf("writing status of Flagd %s/%s: %w", f.Namespace, f.Name, err)
	}
	r.mu.Lock()
	if r.replaced == nil {
		r.replaced = map[topology.Key]string{}
	}
	r.replaced[topology.FlagdKey(f.Namespace, f.Name)] = before
	r.mu.Unlock()
	r.count("status", "update")
	return nil
}

// cacheBehind tells whether the cache still holds the version of f that
// this reconciler's last status write replaced; once it does not, the
// write is forgotten.
func (r *Reconciler) cacheBehind(key topology.Key, f *v1beta1.Flagd) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	replaced, ok := r.replaced[key]
	if !ok {
		return false
	}
	if f.ResourceVersion == replaced {
		return true
	}
	delete(r.replaced, key)
	return false
}
