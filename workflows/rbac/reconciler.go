package rbac

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// NameIndex is the cache field index, on managed Roles and RoleBindings,
// by metadata.name. The RBAC reconciler finds every namespace that holds a
// workload's grants with it, without listing all Roles.
const NameIndex = "flagplane.metadata.name"

// IndexByName is the IndexerFunc of NameIndex.
func IndexByName(obj client.Object) []string { return []string{obj.GetName()} }

// Reconciler keeps the Roles and RoleBindings of one workload's
// kubernetes-provider sources what Desired says, and removes the ones
// the workload no longer needs.
type Reconciler struct {
	Client client.Client
	// Generated are the operator's labels and annotations of the Roles and
	// RoleBindings.
	Generated workflows.GeneratedMetadata
	Writes    func(verb string)
	// Events receives a Warning on the workload when its grants cannot be written.
	Events events.EventRecorder
	// Live reads from the API server, when a Role or RoleBinding to create
	// exists already (the cache holds managed ones only).
	Live client.Reader
	// Failures remembers failed writes for status; nil remembers nothing.
	Failures *workflows.WriteFailures
}

// Reconcile brings the RBAC of a workload (or a Flagd) in line with the
// graph. The logger of ctx names the workload (its caller's, see
// workflows.LogKey).
func (r *Reconciler) Reconcile(ctx context.Context, v *topology.View, workload topology.Key) error {
	logger := log.FromContext(ctx)
	roles, bindings := Desired(v, workload, r.Generated)
	name := Name(workload)
	wantNS := map[string]bool{}
	// A namespace that refuses a write (terminating, a name taken by
	// somebody else) holds up neither the other namespaces' grants nor the
	// removal of grants no longer needed below.
	var errs []error
	for i := range roles {
		wantNS[roles[i].Namespace] = true
		ref := workflows.ObjectRef{Kind: "Role", Namespace: roles[i].Namespace, Name: roles[i].Name}
		err := r.applyRole(ctx, roles[i])
		if err == nil {
			ref.Kind = "RoleBinding"
			err = r.applyRoleBinding(ctx, bindings[i])
		}
		if err != nil && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			continue
		}
		// Which object, and what the API server answered.
		err = workflows.WriteFailed(ref, err)
		if r.Failures.Record(workflows.ObjectRef{Kind: "RBAC", Namespace: roles[i].Namespace, Name: roles[i].Name}, err) && err != nil {
			workflows.Warn(r.Events, workflows.WorkloadEventTarget(ctx, r.Client, workload), workflows.EventApplyFailed, workflows.ActionApply,
				"granting read access to FeatureFlags in namespace %s: %v", roles[i].Namespace, err)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}

	// Grants in namespaces the workload no longer reads from.
	// Bindings go first: a binding without its Role grants nothing.
	var haveBindings rbacv1.RoleBindingList
	if err := r.Client.List(ctx, &haveBindings, client.MatchingFields{NameIndex: name}); err != nil {
		return errors.Join(append(errs, fmt.Errorf("listing RoleBindings named %s: %w", name, err))...)
	}
	for i := range haveBindings.Items {
		if b := &haveBindings.Items[i]; !wantNS[b.Namespace] && r.Generated.Owns(b.Labels) {
			logger.Info("deleting RoleBinding the workload no longer needs", "RoleBinding", klog.KObj(b))
			if err := r.delete(ctx, b); err != nil {
				errs = append(errs, err)
			}
			r.Failures.Record(workflows.ObjectRef{Kind: "RBAC", Namespace: b.Namespace, Name: b.Name}, nil)
		}
	}
	var haveRoles rbacv1.RoleList
	if err := r.Client.List(ctx, &haveRoles, client.MatchingFields{NameIndex: name}); err != nil {
		return errors.Join(append(errs, fmt.Errorf("listing Roles named %s: %w", name, err))...)
	}
	for i := range haveRoles.Items {
		if role := &haveRoles.Items[i]; !wantNS[role.Namespace] && r.Generated.Owns(role.Labels) {
			logger.Info("deleting Role the workload no longer needs", "Role", klog.KObj(role))
			if err := r.delete(ctx, role); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (r *Reconciler) applyRole(ctx context.Context, desired *rbacv1.Role) error {
	current := &rbacv1.Role{}
	if err := r.get(ctx, desired, current); err != nil {
		return err
	}
	if current.UID == "" {
		return workflows.CreateOwned(ctx, r.Client, r.Live, r.Generated, desired.DeepCopy(), rbacv1.SchemeGroupVersion.WithKind("Role"), func() error { return r.apply(ctx, desired) })
	}
	if RoleUpToDate(current, desired) {
		return nil
	}
	return r.apply(ctx, desired)
}

func (r *Reconciler) applyRoleBinding(ctx context.Context, desired *rbacv1.RoleBinding) error {
	current := &rbacv1.RoleBinding{}
	if err := r.get(ctx, desired, current); err != nil {
		return err
	}
	if current.UID == "" {
		return workflows.CreateOwned(ctx, r.Client, r.Live, r.Generated, desired.DeepCopy(), rbacv1.SchemeGroupVersion.WithKind("RoleBinding"), func() error { return r.apply(ctx, desired) })
	}
	if RoleBindingUpToDate(current, desired) {
		return nil
	}
	if current.RoleRef != desired.RoleRef {
		// roleRef is immutable: replace the binding.
		if err := r.delete(ctx, current); err != nil {
			return err
		}
	}
	return r.apply(ctx, desired)
}

func (r *Reconciler) get(ctx context.Context, desired, into client.Object) error {
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(desired), into)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading %s/%s from the cache: %w", desired.GetNamespace(), desired.GetName(), err)
	}
	return nil
}

func (r *Reconciler) apply(ctx context.Context, obj client.Object) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("converting %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	ac := client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u})
	if err := r.Client.Apply(ctx, ac, client.FieldOwner(v1beta1.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s/%s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	if r.Writes != nil {
		r.Writes("apply")
	}
	return nil
}

func (r *Reconciler) delete(ctx context.Context, obj client.Object) error {
	if err := r.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	if r.Writes != nil {
		r.Writes("delete")
	}
	return nil
}
