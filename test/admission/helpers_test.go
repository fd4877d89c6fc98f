package admission

import (
	"context"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/webhooks"
	"github.com/flagplane/flagplane/workflows/injection"
)

// recordingConfigMaps wraps the Pod webhook's ConfigMap ensurer and
// records which ConfigMaps it was asked to make exist, so that a spec can
// tell the webhook's writes from the ConfigMap workflow's.
type recordingConfigMaps struct {
	next webhooks.ConfigMaps
	mu   sync.Mutex
	keys []topology.Key
}

func (r *recordingConfigMaps) Ensure(ctx context.Context, v *topology.View, key topology.Key) error {
	r.mu.Lock()
	r.keys = append(r.keys, key)
	r.mu.Unlock()
	return r.next.Ensure(ctx, v, key)
}

// calls counts the ensure calls for ConfigMaps in namespace ns.
func (r *recordingConfigMaps) calls(ns string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, k := range r.keys {
		if k.Namespace == ns {
			n++
		}
	}
	return n
}

func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	ns, err := cp.NewNamespace(ctx, "adm")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	})
	return ns
}

func create(ctx context.Context, objs ...client.Object) {
	GinkgoHelper()
	for _, o := range objs {
		Expect(k8s.Create(ctx, o)).To(Succeed(), "creating %T %s", o, o.GetName())
	}
}

// podOf is a pod as the DaemonSet controller would create it for ds (there
// are no nodes here, so the controller creates none).
func podOf(ds *appsv1.DaemonSet) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ds.Namespace, GenerateName: ds.Name + "-", Labels: ds.Spec.Template.Labels,
			Annotations: ds.Spec.Template.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: *ds.Spec.Template.Spec.DeepCopy(),
	}
}

// pods lists the pods of an app.
func pods(ctx context.Context, ns, app string) func() []corev1.Pod {
	return func() []corev1.Pod {
		var list corev1.PodList
		Expect(k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
		return list.Items
	}
}

// sidecar returns the injected flagd init container of a pod, or nil.
func sidecar(p corev1.Pod) *corev1.Container {
	for i := range p.Spec.InitContainers {
		if p.Spec.InitContainers[i].Name == injection.SidecarName {
			return &p.Spec.InitContainers[i]
		}
	}
	return nil
}

// HaveSidecar matches a pod with the flagd native sidecar.
func HaveSidecar() OmegaMatcher {
	return WithTransform(func(p corev1.Pod) *corev1.Container { return sidecar(p) }, And(
		Not(BeNil()),
		HaveField("RestartPolicy", HaveValue(Equal(corev1.ContainerRestartPolicyAlways))),
	))
}

// mountsFlagSet matches a pod whose sidecar mounts the generated ConfigMap of a flag set.
func mountsFlagSet(fsNS, fsName string) OmegaMatcher {
	f := topology.FlagSetKey(fsNS, fsName)
	return And(
		HaveField("Spec.Volumes", ContainElement(And(
			HaveField("Name", injection.FlagVolumeName(f)),
			HaveField("ConfigMap.Name", topology.ConfigMapName(f)),
		))),
		WithTransform(func(p corev1.Pod) []corev1.VolumeMount { return sidecar(p).VolumeMounts },
			ContainElement(HaveField("MountPath", injection.FlagMountDir(f)))),
	)
}

// appEnv matches a pod whose app containers have the env var.
func appEnv(name, value string) OmegaMatcher {
	return HaveField("Spec.Containers", HaveEach(HaveField("Env", ContainElement(corev1.EnvVar{Name: name, Value: value}))))
}

func arg(c *corev1.Container, flag string) string {
	for i, a := range c.Args {
		if a == flag && i+1 < len(c.Args) {
			return c.Args[i+1]
		}
	}
	return ""
}

func configMap(ctx context.Context, ns, fsNS, fsName string) func() error {
	return func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: topology.ConfigMapName(topology.FlagSetKey(fsNS, fsName))}, &corev1.ConfigMap{})
	}
}

// The objects of the specs, from the shared fixtures.
var (
	source      = fixtures.Source
	file        = fixtures.FileRef
	targeting   = fixtures.Targeting
	podTemplate = fixtures.PodTemplate
	deployment  = fixtures.Deployment
	statefulSet = fixtures.StatefulSet
	daemonSet   = fixtures.DaemonSet
)

func flagSet(ns, name string) *v1beta1.FeatureFlag { return fixtures.FlagSet(ns, name, "off") }
