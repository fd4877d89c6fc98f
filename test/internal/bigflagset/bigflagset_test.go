package bigflagset

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/flagplane/flagplane/api"
)

var featureFlags = schema.GroupResource{Group: "core.openfeature.dev", Resource: "featureflags"}

// The API server's 504 when a create outlasts its request timeout.
var timeout = apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0)

// answers is a client whose creates answer with each of errs in turn,
// storing the object or not as stored says, and then as the fake does.
func answers(t *testing.T, errs []error, stored []bool) (client.Client, *int) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := api.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	creates := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
			i := creates
			creates++
			if i >= len(errs) {
				return c.Create(ctx, o, opts...)
			}
			if stored[i] {
				if err := c.Create(ctx, o.DeepCopyObject().(client.Object), opts...); err != nil {
					return err
				}
			}
			return errs[i]
		},
	}).Build()
	return c, &creates
}

func TestCreate(t *testing.T) {
	etcd := apierrors.NewInternalError(errors.New("etcdserver: request is too large"))
	for _, tc := range []struct {
		name    string
		errs    []error
		stored  []bool
		want    func(error) bool
		creates int
	}{
		{"answered at once", nil, nil, func(err error) bool { return err == nil }, 1},
		{"timed out, stored all the same: read back, not sent again", []error{timeout}, []bool{true}, func(err error) bool { return err == nil }, 1},
		{"timed out, not stored: sent again", []error{timeout}, []bool{false}, func(err error) bool { return err == nil }, 2},
		{"timed out, stored after the read back: the AlreadyExists is the first create's",
			[]error{timeout, apierrors.NewAlreadyExists(featureFlags, "f")}, []bool{false, false}, func(err error) bool { return err == nil }, 2},
		{"a webhook that did not answer: sent again",
			[]error{errors.New(`Internal error occurred: failed calling webhook "x": context deadline exceeded`)}, []bool{false}, func(err error) bool { return err == nil }, 2},
		{"etcd's refusal of the size is an answer", []error{etcd}, []bool{false}, func(err error) bool { return errors.Is(err, etcd) }, 1},
		{"an AlreadyExists of a first create is an answer",
			[]error{apierrors.NewAlreadyExists(featureFlags, "f")}, []bool{false}, apierrors.IsAlreadyExists, 1},
		{"no answer to any", []error{timeout, timeout, timeout}, []bool{false, false, false}, apierrors.IsTimeout, attempts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, creates := answers(t, tc.errs, tc.stored)
			err := Create(t.Context(), c, FlagSet("ns", "f", 2))
			if !tc.want(err) {
				t.Errorf("Create: %v", err)
			}
			if *creates != tc.creates {
				t.Errorf("%d creates sent, want %d", *creates, tc.creates)
			}
		})
	}
}
