package workflows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// Generated objects are flagplane's only when they carry the managed-by
// label (GeneratedMetadata.Owns): the informers see nothing else. A
// ConfigMap, Role or RoleBinding that somebody else made under a name
// flagplane generates is never taken over (written) nor deleted; the
// object's owners are told, and flagplane tries again with backoff, so that
// it takes the name once it is free.

// NotManagedError says that an object of a name flagplane generates exists
// and is not flagplane's.
type NotManagedError struct {
	Kind, Namespace, Name string
	// ManagedBy are the values of the managed-by label that would make it
	// flagplane's (GeneratedMetadata.OwnedValues); empty is flagplane's
	// default.
	ManagedBy []string
}

func (e *NotManagedError) Error() string {
	values := e.ManagedBy
	if len(values) == 0 {
		values = []string{v1beta1.ManagedByValue}
	}
	return fmt.Sprintf("%s %s/%s exists and is not managed by flagplane (no label %s=%s): flagplane neither takes it over nor deletes it",
		e.Kind, e.Namespace, e.Name, v1beta1.LabelManagedBy, strings.Join(values, " or "))
}

// NotManaged is the NotManagedError of an object of kind, namespace and
// name under the metadata g.
func (g GeneratedMetadata) NotManaged(kind, namespace, name string) *NotManagedError {
	return &NotManagedError{Kind: kind, Namespace: namespace, Name: name, ManagedBy: g.OwnedValues()}
}

// CreateOwned creates a generated object that the cache does not hold.
// Creation fails when the name is taken; then the object is read from the
// API server (the cache may not yet have a create of flagplane's own): one
// that gen Owns is applied, anything else is a NotManagedError.
func CreateOwned(ctx context.Context, c client.Client, live client.Reader, gen GeneratedMetadata, obj client.Object, gvk schema.GroupVersionKind, apply func() error) error {
	kind := gvk.Kind
	err := c.Create(ctx, obj, client.FieldOwner(v1beta1.FieldManager))
	if err == nil || !apierrors.IsAlreadyExists(err) {
		return err
	}
	if live == nil {
		// Only the API server can tell whose it is; the cache holds ours only.
		return fmt.Errorf("%s %s/%s exists and cannot be checked: %w", kind, obj.GetNamespace(), obj.GetName(), err)
	}
	existing := &metav1.PartialObjectMetadata{}
	existing.SetGroupVersionKind(gvk)
	if err := live.Get(ctx, client.ObjectKeyFromObject(obj), existing); err != nil {
		return fmt.Errorf("reading %s %s/%s, whose name is taken: %w", kind, obj.GetNamespace(), obj.GetName(), err)
	}
	if !gen.Owns(existing.Labels) {
		return gen.NotManaged(kind, obj.GetNamespace(), obj.GetName())
	}
	return apply()
}

// IsNotManaged tells whether err is, or wraps, a NotManagedError.
func IsNotManaged(err error) bool {
	var nm *NotManagedError
	return errors.As(err, &nm)
}

// ObjectRef names a generated object.
type ObjectRef struct {
	Kind, Namespace, Name string
}

// WriteFailures remembers why the last write of each generated object
// failed, until one succeeds, so that status can say it (ApplyFailed)
// instead of "not created yet", and Events go out once per failure rather
// than on every retry. It is safe for concurrent use.
type WriteFailures struct {
	mu      sync.Mutex
	m       map[ObjectRef]Failure
	changes uint64
}

// Failure is why the last write of a generated object failed, and whether
// only a user's action lets it succeed (PermanentFailure).
type Failure struct {
	Message   string
	Permanent bool
}

// Record stores err for ref (nil clears it) and tells whether that changed
// what is remembered: a new failure, another failure, or a recovery.
func (f *WriteFailures) Record(ref ObjectRef, err error) bool {
	if f == nil {
		return err != nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	before, had := f.m[ref]
	if err == nil {
		delete(f.m, ref)
		if had {
			f.changes++
		}
		return had
	}
	if f.m == nil {
		f.m = map[ObjectRef]Failure{}
	}
	now := Failure{Message: err.Error(), Permanent: PermanentFailure(err)}
	f.m[ref] = now
	if changed := !had || before != now; changed {
		f.changes++
		return true
	}
	return false
}

// Count is the number of Record calls that changed what is remembered, a
// cheap way to tell whether a reconcile changed any failure.
func (f *WriteFailures) Count() uint64 {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changes
}

// Of returns the last write failure of ref, or the zero Failure.
func (f *WriteFailures) Of(ref ObjectRef) Failure {
	if f == nil {
		return Failure{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[ref]
}

// RequeueAfter is an error that asks for the key to be reconciled again
// after a while, without counting as a failure.
type RequeueAfter time.Duration

func (r RequeueAfter) Error() string {
	return fmt.Sprintf("reconcile again in %s", time.Duration(r))
}
