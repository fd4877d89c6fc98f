package flagds

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/manifests"
	"github.com/flagplane/flagplane/workflows/rbac"
)

// TestWriteFailureNamesTheObject: when a Flagd's Service cannot be
// written, the Warning Event on the Flagd and its Programmed condition name
// the Service (kind, namespace/name) and the API server's reason.
func TestWriteFailureNamesTheObject(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	in, err := os.Open(filepath.Join("testdata", "file-ingress-gateway.in.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	defer in.Close()
	topo := topology.New()
	g.Expect(manifests.Load(topo, in)).To(Succeed())
	v := topo.Snapshot()
	key := topology.FlagdKey("shop", "flags")
	f, _ := v.Flagd(key)

	s := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(s)).To(Succeed())
	g.Expect(v1beta1.AddToScheme(s)).To(Succeed())
	api := fake.NewClientBuilder().WithScheme(s).WithObjects(f.DeepCopy()).WithStatusSubresource(&v1beta1.Flagd{}).
		WithIndex(&rbacv1.Role{}, rbac.NameIndex, rbac.IndexByName).WithIndex(&rbacv1.RoleBinding{}, rbac.NameIndex, rbac.IndexByName).Build()
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "flags",
		errors.New(`admission webhook "no-loadbalancers.example" denied the request: type LoadBalancer is not allowed`))
	c := interceptor.NewClient(api, interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			if u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err == nil && u["kind"] == "Service" {
				return forbidden
			}
			return c.Apply(ctx, obj, opts...)
		},
	})
	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{Client: c, Live: c, Options: goldenFlagdOptions(), RBAC: &rbac.Reconciler{Client: c, Live: c},
		Events: recorder, Failures: &workflows.WriteFailures{}}
	g.Expect(r.Reconcile(ctx, v, key)).NotTo(Succeed())

	want := `Service shop/flags not written: the API server refused it (Forbidden): services "flags" is forbidden: ` +
		`admission webhook "no-loadbalancers.example" denied the request: type LoadBalancer is not allowed`
	g.Expect(recorder.Events).To(Receive(Equal("Warning " + workflows.EventApplyFailed + " " + want)))
	got := &v1beta1.Flagd{}
	g.Expect(api.Get(ctx, client.ObjectKeyFromObject(f), got)).To(Succeed())
	programmed := meta.FindStatusCondition(got.Status.Conditions, v1beta1.ConditionProgrammed)
	g.Expect(programmed).NotTo(BeNil())
	g.Expect(programmed.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(programmed.Reason).To(Equal(v1beta1.ReasonApplyFailed))
	g.Expect(programmed.Message).To(Equal("waiting for " + want))
}
