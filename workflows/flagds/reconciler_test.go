package flagds

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// TestReconcileWaitsForItsOwnStatusWrite: right after the reconciler wrote
// a Flagd's status, its cache may still hold the Flagd that write replaced.
// A reconcile then would compare with a status that is gone and write with
// a stale resourceVersion, refused with a Conflict (a "Reconciler error"):
// it waits instead, without counting a failure, until the cache catches up.
func TestReconcileWaitsForItsOwnStatusWrite(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	scheme := runtime.NewScheme()
	g.Expect(v1beta1.AddToScheme(scheme)).To(Succeed())
	api := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1beta1.Flagd{}).
		WithObjects(&v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "edge"}}).Build()
	key := topology.FlagdKey("shop", "edge")
	stale := &v1beta1.Flagd{}
	g.Expect(api.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "edge"}, stale)).To(Succeed())

	// The cache: what the API server held before the write, until told otherwise.
	behind := true
	cache := interceptor.NewClient(api, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if f, ok := obj.(*v1beta1.Flagd); ok && behind {
				stale.DeepCopyInto(f)
				return nil
			}
			return c.Get(ctx, k, obj, opts...)
		},
	})
	r := &Reconciler{Client: cache}
	desired := v1beta1.FlagdStatus{}
	meta.SetStatusCondition(&desired.Conditions, metav1.Condition{Type: v1beta1.ConditionAccepted, Status: metav1.ConditionTrue,
		Reason: "Accepted", Message: "written"})
	g.Expect(r.writeStatus(ctx, stale, desired)).To(Succeed())

	again := stale.DeepCopy()
	again.Status.ObservedGeneration = 7
	g.Expect(apierrors.IsConflict(api.Status().Update(ctx, again))).To(BeTrue(),
		"a status written from the stale Flagd is refused: what the reconciler must not do")

	err := r.Reconcile(ctx, topology.New().Snapshot(), key)
	var later workflows.RequeueAfter
	g.Expect(errors.As(err, &later)).To(BeTrue(), "it runs again a little later: %v", err)

	behind = false
	fresh := &v1beta1.Flagd{}
	g.Expect(cache.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "edge"}, fresh)).To(Succeed())
	g.Expect(r.cacheBehind(key, fresh)).To(BeFalse(), "the cache holds the write")
	g.Expect(r.cacheBehind(key, stale)).To(BeFalse(), "and the write is forgotten once it did")
}
