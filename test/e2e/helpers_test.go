package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/flagdapi"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// flagKey is the one flag of the flag sets (fixtures.FlagSet).
const flagKey = fixtures.FlagKey

// newNamespace creates a namespace for a spec and deletes it afterwards
// (which stops its pods on the node). When the spec fails, the logs of
// every container that ran in it, and its Events, go into the report.
func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	ns, err := w.cp.NewNamespace(ctx, "e2e")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		if CurrentSpecReport().Failed() {
			AddReportEntry("container logs of namespace "+ns, n.LogsOf(ns))
			AddReportEntry("events of namespace "+ns, eventsOf(ctx, ns))
		}
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	})
	return ns
}

// eventsOf renders the Events of a namespace, oldest first, for a report.
func eventsOf(ctx context.Context, ns string) string { return fixtures.Events(ctx, k8s, ns) }

func create(ctx context.Context, objs ...client.Object) {
	GinkgoHelper()
	for _, o := range objs {
		Expect(k8s.Create(ctx, o)).To(Succeed(), "creating %T %s", o, o.GetName())
	}
}

// flagSet is a FeatureFlag with one boolean flag, flagKey, at variant.
func flagSet(ns, name, variant string) *v1beta1.FeatureFlag {
	return fixtures.FlagSet(ns, name, variant)
}

// flagFile is flagSet's flag as flagd's JSON, for the sources flagplane
// only passes through.
func flagFile(variant string) string {
	return `{"flags":{"` + flagKey + `":{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":"` + variant + `"}}}`
}

// setVariant edits the default variant of a FeatureFlag's flag.
func setVariant(ctx context.Context, ff *v1beta1.FeatureFlag, variant string) {
	GinkgoHelper()
	Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), ff); err != nil {
			return err
		}
		f := ff.Spec.FlagSpec.Flags[flagKey]
		f.DefaultVariant = variant
		ff.Spec.FlagSpec.Flags[flagKey] = f
		return k8s.Update(ctx, ff)
	}).Should(Succeed())
}

// source is a FeatureFlagSource with one entry, targeting Deployment target.
func source(ns, name, target string, entry v1beta1.Source, mutate ...func(*v1beta1.FeatureFlagSource)) *v1beta1.FeatureFlagSource {
	return fixtures.Source(ns, name, []v1beta1.Source{entry}, append([]func(*v1beta1.FeatureFlagSource){fixtures.Targeting("Deployment", target)}, mutate...)...)
}

// deployment is a one-replica Deployment whose app container is image,
// with the given pod-template annotations.
func deployment(ns, name, image string, annotations map[string]string) *appsv1.Deployment {
	d := fixtures.Deployment(ns, name, nil, annotations)
	d.Spec.Template.Spec.Containers[0].Image = image
	// Replaced pods go at once: the node stops their processes within this.
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	return d
}

func key(pod *corev1.Pod) k8stypes.NamespacedName {
	return k8stypes.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
}

// podsOf lists the pods of an app that are not being deleted.
func podsOf(ctx context.Context, ns, app string) func() ([]corev1.Pod, error) {
	return func() ([]corev1.Pod, error) {
		var list corev1.PodList
		if err := k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
			return nil, err
		}
		var out []corev1.Pod
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				out = append(out, p)
			}
		}
		return out, nil
	}
}

func beReady() types.GomegaMatcher {
	return HaveField("Status.Conditions", ContainElement(And(HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))))
}

// readyPod waits until the app has exactly one pod, Ready, admitted with
// flagplane's injection, and returns it. Objects created together may reach
// the operator's informers in any order: a pod admitted before its source
// was seen is rolled by the healer, and this waits for its successor.
func readyPod(ctx context.Context, ns, app string) *corev1.Pod {
	GinkgoHelper()
	return onePod(ctx, ns, app, HaveField("ObjectMeta.Annotations", HaveKey(restarts.AnnotationInjection)))
}

// readyUninjectedPod is readyPod for a workload nothing targets.
func readyUninjectedPod(ctx context.Context, ns, app string) *corev1.Pod {
	GinkgoHelper()
	return onePod(ctx, ns, app, HaveField("ObjectMeta.Annotations", Not(HaveKey(restarts.AnnotationInjection))))
}

func onePod(ctx context.Context, ns, app string, m types.GomegaMatcher) *corev1.Pod {
	GinkgoHelper()
	var pods []corev1.Pod
	Eventually(func(g Gomega) {
		var err error
		pods, err = podsOf(ctx, ns, app)()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods).To(ConsistOf(And(beReady(), m)))
	}).Should(Succeed(), "the pod of %s/%s never came up Ready", ns, app)
	return &pods[0]
}

// sidecarOf returns the injected flagd of a pod.
func sidecarOf(pod *corev1.Pod) *corev1.Container {
	GinkgoHelper()
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == injection.SidecarName {
			return &pod.Spec.InitContainers[i]
		}
	}
	Fail("pod " + pod.Name + " has no injected flagd")
	return nil
}

// flagdAddr is where the node serves the injected flagd's evaluation API
// (its port 8013, remapped).
func flagdAddr(pod *corev1.Pod) string {
	GinkgoHelper()
	addr, ok := n.Addr(key(pod), injection.SidecarName, 8013)
	Expect(ok).To(BeTrue(), "no host port for flagd's evaluation port of pod %s", pod.Name)
	return addr
}

// pidOf is the process of a container of a running pod.
func pidOf(pod *corev1.Pod, container string) int {
	GinkgoHelper()
	pid, ok := n.PID(key(pod), container)
	Expect(ok).To(BeTrue(), "container %s of pod %s has no process", container, pod.Name)
	return pid
}

// evaluation is a boolean evaluation by flagd's HTTP (Connect) API, or
// its error.
type evaluation = flagdapi.Evaluation

func evaluated(variant string) evaluation {
	return evaluation{Value: variant == "on", Variant: variant, Reason: "STATIC"}
}

// resolve evaluates flagKey over flagd's HTTP API at addr.
func resolve(addr string) func() (evaluation, error) {
	return func() (evaluation, error) { return resolveOnce(addr) }
}

func resolveOnce(addr string) (evaluation, error) {
	return flagdapi.Resolve(context.Background(), addr, flagdapi.Boolean, flagKey, nil)
}

// eventsAbout lists the Events of a namespace about one object.
func eventsAbout(ctx context.Context, ns, kind, name string) func() ([]eventsv1.Event, error) {
	return func() ([]eventsv1.Event, error) {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		var out []eventsv1.Event
		for _, e := range list.Items {
			if e.Regarding.Kind == kind && e.Regarding.Name == name {
				out = append(out, e)
			}
		}
		return out, nil
	}
}

// upstream is a standalone flagd running as a bare Pod on the node (no
// workload: nothing targets it), serving flagFile from a ConfigMap of the
// test's: the far end of the sources flagplane only passes through.
type upstream struct {
	cm  *corev1.ConfigMap
	pod *corev1.Pod
	// syncAddr is its flagd.sync.v1 port (8015), remapped by the node.
	syncAddr string
}

const upstreamFlagFile = "/etc/upstream/flags.flagd.json"

// startUpstream runs an upstream serving variant and waits until it is Ready.
func startUpstream(ctx context.Context, ns, variant string) *upstream {
	GinkgoHelper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "upstream-flags"},
		Data:       map[string]string{"flags.flagd.json": flagFile(variant)},
	}
	flagd := corev1.Container{
		Name: "flagd", Image: injection.DefaultSidecarOptions().ImageReference(),
		Args: []string{"start", "--port", "8013", "--management-port", "8014", "--sync-port", "8015",
			"--sources", `[{"uri":"` + upstreamFlagFile + `","provider":"file"}]`},
		Ports: []corev1.ContainerPort{{Name: "flagd", ContainerPort: 8013}, {Name: "flagd-mgmt", ContainerPort: 8014}, {Name: "flagd-sync", ContainerPort: 8015}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8014)}},
			PeriodSeconds: 1,
		},
		VolumeMounts:    []corev1.VolumeMount{{Name: "flags", MountPath: filepath.Dir(upstreamFlagFile), ReadOnly: true}},
		SecurityContext: injection.HardenedSecurityContext(),
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "upstream"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{flagd},
			Volumes: []corev1.Volume{{Name: "flags", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}},
			}}},
		},
	}
	create(ctx, cm, pod)
	Eventually(func() (*corev1.Pod, error) {
		got := &corev1.Pod{}
		return got, k8s.Get(ctx, client.ObjectKeyFromObject(pod), got)
	}).Should(beReady(), "the upstream flagd never came up Ready")
	addr, ok := n.Addr(key(pod), "flagd", 8015)
	Expect(ok).To(BeTrue())
	return &upstream{cm: cm, pod: pod, syncAddr: addr}
}

// setVariant edits the upstream's flags.
func (u *upstream) setVariant(ctx context.Context, variant string) {
	GinkgoHelper()
	u.cm.Data["flags.flagd.json"] = flagFile(variant)
	Expect(k8s.Update(ctx, u.cm)).To(Succeed())
}

// staysAsAdmitted checks that the app keeps its one pod, Ready: nothing
// rolls the workload. The operator acts within milliseconds of an event;
// two seconds leave it ample time to show otherwise.
func staysAsAdmitted(ctx context.Context, pod *corev1.Pod) {
	GinkgoHelper()
	Consistently(podsOf(ctx, pod.Namespace, pod.Labels["app"]), 2*time.Second).
		Should(ConsistOf(And(HaveField("UID", pod.UID), beReady())), "the workload was rolled")
}

// replacePod deletes the app's pod and returns the one its ReplicaSet
// creates instead, once Ready: a pod admitted now.
func replacePod(ctx context.Context, pod *corev1.Pod) *corev1.Pod {
	GinkgoHelper()
	Expect(k8s.Delete(ctx, pod)).To(Succeed())
	return successor(ctx, pod)
}

// successor waits until the app's only pod is another than pod, Ready,
// and returns it.
func successor(ctx context.Context, pod *corev1.Pod) *corev1.Pod {
	GinkgoHelper()
	var next *corev1.Pod
	Eventually(func(g Gomega) {
		pods, err := podsOf(ctx, pod.Namespace, pod.Labels["app"])()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods).To(ConsistOf(And(Not(HaveField("UID", pod.UID)), beReady())))
		next = &pods[0]
	}).Should(Succeed(), "no Ready pod replaced %s", pod.Name)
	return next
}

// processGone tells whether a process has exited (and been reaped).
func processGone(pid int) func() bool {
	return func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		return os.IsNotExist(err)
	}
}
