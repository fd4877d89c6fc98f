package admission

import (
	"context"
	"encoding/json"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/webhooks"
	"github.com/flagplane/flagplane/workflows"
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

func flagSet(ns, name string) *v1beta1.FeatureFlag {
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
		"new-checkout": {State: "ENABLED", Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: "off"},
	}
	return ff
}

func source(ns, name string, entries []v1beta1.Source, mutate ...func(*v1beta1.FeatureFlagSource)) *v1beta1.FeatureFlagSource {
	s := &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	s.Spec.Sources = entries
	for _, m := range mutate {
		m(s)
	}
	return s
}

func file(ref string) v1beta1.Source {
	return v1beta1.Source{Source: ref, Provider: v1beta1.SyncProviderFile}
}

func targeting(kind, name string) func(*v1beta1.FeatureFlagSource) {
	return func(s *v1beta1.FeatureFlagSource) {
		s.Spec.TargetRefs = append(s.Spec.TargetRefs, v1beta1.TargetRef{Group: "apps", Kind: kind, Name: name})
	}
}

func podTemplate(app string, annotations map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}, Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}
}

func deployment(ns, name string, labels, podAnnotations map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name, podAnnotations),
		},
	}
}

func statefulSet(ns, name string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name, nil),
		},
	}
}

func daemonSet(ns, name string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name, nil),
		},
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
		if p.Spec.InitContainers[i].Name == workflows.SidecarName {
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
			HaveField("Name", workflows.FlagVolumeName(f)),
			HaveField("ConfigMap.Name", topology.ConfigMapName(f)),
		))),
		WithTransform(func(p corev1.Pod) []corev1.VolumeMount { return sidecar(p).VolumeMounts },
			ContainElement(HaveField("MountPath", workflows.FlagMountDir(f)))),
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
