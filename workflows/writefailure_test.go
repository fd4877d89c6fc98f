package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/configmaps"
	"github.com/flagplane/flagplane/workflows/internal/workflowstest"
	"github.com/flagplane/flagplane/workflows/rbac"
	"github.com/flagplane/flagplane/workflows/status"
)

// configMapTooLong is what the API server answers a ConfigMap over its
// limit (Kubernetes' ValidateConfigMap), wrapped as the reconciler wraps it.
func configMapTooLong(name string) error {
	return fmt.Errorf("applying ConfigMap shop/%s: %w", name, apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, name,
		field.ErrorList{field.TooLong(field.NewPath(""), "", 1048576)}))
}

// TestWriteErrorMessage: a failed write says which object and what the API
// server answered (its reason and message), once, however the error was
// wrapped; a name taken by somebody else says so in its own words.
func TestWriteErrorMessage(t *testing.T) {
	cm := workflows.ObjectRef{Kind: "ConfigMap", Namespace: "shop", Name: "flagd.shop.flags"}
	role := workflows.ObjectRef{Kind: "Role", Namespace: "team", Name: "flagplane-web"}
	dep := workflows.ObjectRef{Kind: "Deployment", Namespace: "shop", Name: "edge"}
	for _, tc := range []struct {
		name      string
		ref       workflows.ObjectRef
		err       error
		want      string
		permanent bool
	}{
		{"a ConfigMap over the API server's limit", cm, configMapTooLong("flagd.shop.flags"),
			`ConfigMap shop/flagd.shop.flags not written: the API server refused it (Invalid): ConfigMap "flagd.shop.flags" is invalid: ` +
				`[]: Too long: may not be more than 1048576 bytes`, true},
		{"a Role an admission policy forbids", role,
			apierrors.NewForbidden(schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "roles"}, "flagplane-web", errors.New("denied by policy no-roles")),
			`Role team/flagplane-web not written: the API server refused it (Forbidden): roles.rbac.authorization.k8s.io "flagplane-web" is forbidden: denied by policy no-roles`, true},
		{"a request body over the API server's limit", dep, apierrors.NewRequestEntityTooLargeError("limit is 3145728"),
			`Deployment shop/edge not written: the API server refused it (RequestEntityTooLarge): Request entity too large: limit is 3145728`, true},
		{"a quota, to retry", cm, apierrors.NewTooManyRequests("try later", 1),
			`ConfigMap shop/flagd.shop.flags not written: the API server refused it (TooManyRequests): try later`, false},
		{"no answer", dep, fmt.Errorf("applying Deployment shop/edge: %w", errors.New("connection refused")),
			`Deployment shop/edge not written: applying Deployment shop/edge: connection refused`, false},
		{"a name taken", cm, workflows.GeneratedMetadata{}.NotManaged("ConfigMap", "shop", "flagd.shop.flags"),
			`ConfigMap shop/flagd.shop.flags exists and is not managed by flagplane (no label app.kubernetes.io/managed-by=flagplane): flagplane neither takes it over nor deletes it`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := workflows.WriteFailed(tc.ref, tc.err)
			g.Expect(err).To(MatchError(tc.want))
			g.Expect(workflows.WriteFailed(tc.ref, err)).To(BeIdenticalTo(err), "wrapped once")
			g.Expect(errors.Is(err, tc.err)).To(BeTrue(), "the API server's error stays inside")
			g.Expect(workflows.PermanentFailure(err)).To(Equal(tc.permanent))
		})
	}
	NewWithT(t).Expect(workflows.WriteFailed(cm, nil)).To(Succeed())
}

// refusingApply is a client whose server-side applies and creates of kind
// are refused with err.
func refusingApply(c client.Client, kind string, err error) client.Client {
	return interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			u, convErr := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if convErr == nil && u["kind"] == kind {
				return err
			}
			return c.Apply(ctx, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			gvk, _ := c.GroupVersionKindFor(obj)
			if gvk.Kind == kind {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
	})
}

// TestWriteFailuresNameTheObject: when a generated ConfigMap, Role or
// RoleBinding cannot be written, the Warning Event and the status
// condition name the object (kind, namespace/name) and the API server's
// reason, in the same words.
func TestWriteFailuresNameTheObject(t *testing.T) {
	cmName := topology.ConfigMapName(topology.FlagSetKey("shop", "flags"))
	web := topology.WorkloadKey(topology.KindDeployment, "shop", "web")

	t.Run("ConfigMap", func(t *testing.T) {
		g := NewWithT(t)
		v, c := workflowstest.World(t)
		failures, recorder := &workflows.WriteFailures{}, events.NewFakeRecorder(10)
		r := &configmaps.Reconciler{Client: refusingApply(c, "ConfigMap", configMapTooLong(cmName)), Live: c,
			Settings: workflows.DefaultSettings(), Failures: failures, Events: recorder}
		err := r.Reconcile(context.Background(), v, "shop", cmName)
		want := `ConfigMap shop/` + cmName + ` not written: the API server refused it (Invalid): ConfigMap "` + cmName +
			`" is invalid: []: Too long: may not be more than 1048576 bytes`
		g.Expect(err).To(MatchError(want))
		g.Expect(recorder.Events).To(Receive(Equal("Warning " + workflows.EventApplyFailed + " " + want)))

		src, _ := v.Source(topology.SourceKey("shop", "src"))
		st := status.DesiredSource(v, src, status.CacheObserved{Ctx: context.Background(), Reader: c, Failures: failures}, workflows.DefaultSettings())
		programmed := findCondition(st.Conditions, v1beta1.ConditionProgrammed)
		g.Expect(programmed.Reason).To(Equal(v1beta1.ReasonApplyFailed))
		g.Expect(programmed.Message).To(HavePrefix("waiting for " + want))
		g.Expect(findCondition(st.Conditions, v1beta1.ConditionStalled).Status).To(BeEquivalentTo("True"), "refused for good")
	})

	t.Run("Role", func(t *testing.T) {
		g := NewWithT(t)
		v, c := workflowstest.World(t)
		forbidden := apierrors.NewForbidden(schema.GroupResource{Group: rbacv1.GroupName, Resource: "roles"}, rbac.Name(web), errors.New("denied by policy no-roles"))
		failures, recorder := &workflows.WriteFailures{}, events.NewFakeRecorder(10)
		r := &rbac.Reconciler{Client: workflowstest.EmptyCache{Client: refusingApply(c, "Role", forbidden)}, Live: c, Failures: failures, Events: recorder}
		err := r.Reconcile(context.Background(), v, web)
		want := `Role shop/` + rbac.Name(web) + ` not written: the API server refused it (Forbidden): roles.rbac.authorization.k8s.io "` +
			rbac.Name(web) + `" is forbidden: denied by policy no-roles`
		g.Expect(err).To(MatchError(want))
		g.Expect(recorder.Events).To(Receive(Equal("Warning " + workflows.EventApplyFailed + " granting read access to FeatureFlags in namespace shop: " + want)))

		src, _ := v.Source(topology.SourceKey("shop", "src"))
		obs := status.CacheObserved{Ctx: context.Background(), Reader: workflowstest.EmptyCache{Client: c}, Failures: failures}
		st := status.DesiredSource(v, src, obs, workflows.DefaultSettings())
		programmed := findCondition(st.Conditions, v1beta1.ConditionProgrammed)
		g.Expect(programmed.Reason).To(Equal(v1beta1.ReasonApplyFailed))
		g.Expect(programmed.Message).To(ContainSubstring("RBAC for Deployment shop/web in namespace shop: " + want))
	})

	t.Run("RoleBinding", func(t *testing.T) {
		g := NewWithT(t)
		v, c := workflowstest.World(t)
		invalid := apierrors.NewInvalid(schema.GroupKind{Group: rbacv1.GroupName, Kind: "RoleBinding"}, rbac.Name(web),
			field.ErrorList{field.Invalid(field.NewPath("subjects").Index(0).Child("name"), "", "must not be empty")})
		recorder := events.NewFakeRecorder(10)
		r := &rbac.Reconciler{Client: workflowstest.EmptyCache{Client: refusingApply(c, "RoleBinding", invalid)}, Live: c,
			Failures: &workflows.WriteFailures{}, Events: recorder}
		err := r.Reconcile(context.Background(), v, web)
		g.Expect(err).To(MatchError(HavePrefix(`RoleBinding shop/` + rbac.Name(web) + ` not written: the API server refused it (Invalid): `)))
		g.Expect(recorder.Events).To(Receive(ContainSubstring("RoleBinding shop/" + rbac.Name(web) + " not written")))
	})
}
