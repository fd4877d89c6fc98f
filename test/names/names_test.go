package names

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/flagdapi"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/rbac"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// longName is a DNS subdomain of exactly 253 characters, the longest name
// of a FeatureFlag, a FeatureFlagSource or a Deployment: prefix, a dot and
// as many of c as fit, ending alphanumeric.
func longName(prefix string, c byte) string {
	return prefix + "." + strings.Repeat(string(c), validation.DNS1123SubdomainMaxLength-len(prefix)-1)
}

var _ = Describe("the longest names", func() {
	It("a FeatureFlag of 253 characters in a namespace of 63, read by a Deployment of 253 with the file, kubernetes and flagd-proxy providers and by a Flagd of 63: every generated object is written, the pods run, flagd serves the flag", func(ctx SpecContext) {
		ns := newLongNamespace(ctx)
		ff := fixtures.FlagSet(ns, longName("checkout", 'f'), "on")
		src := fixtures.Source(ns, longName("source", 's'), []v1beta1.Source{
			{Source: ff.Name, Provider: v1beta1.SyncProviderFile},
			{Source: ff.Name, Provider: v1beta1.SyncProviderKubernetes},
			{Source: ff.Name, Provider: v1beta1.SyncProviderFlagdProxy},
		})
		web := longName("web", 'w')
		src.Spec.TargetRefs = []v1beta1.TargetRef{{Group: "apps", Kind: "Deployment", Name: web}}
		fd := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "f" + strings.Repeat("d", 61) + "0"}}
		fd.Spec.FeatureFlagSource = src.Name
		create(ctx, ff, src, deployment(ns, web), fd)

		f := topology.FlagSetKey(ns, ff.Name)
		cmName, dataKey := topology.ConfigMapName(f), topology.ConfigMapDataKey(f)
		Expect(len(ns)+len(ff.Name)).To(BeNumerically(">", validation.DNS1123SubdomainMaxLength), "the plain names would not fit")

		By("the ConfigMap, under its data key")
		Eventually(func(g Gomega) {
			var cm corev1.ConfigMap
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: cmName}, &cm)).To(Succeed())
			g.Expect(cm.Data).To(HaveKey(dataKey))
		}).Should(Succeed())

		By("the Roles and RoleBindings of the Deployment and of the Flagd")
		for _, w := range []topology.Key{topology.WorkloadKey(topology.KindDeployment, ns, web), topology.FlagdKey(ns, fd.Name)} {
			key := client.ObjectKey{Namespace: ns, Name: rbac.Name(w)}
			Eventually(func() error { return k8s.Get(ctx, key, &rbacv1.Role{}) }).Should(Succeed(), "Role of %s", w)
			Eventually(func() error { return k8s.Get(ctx, key, &rbacv1.RoleBinding{}) }).Should(Succeed(), "RoleBinding of %s", w)
		}

		By("the Flagd's Deployment and Service; its pod runs")
		Eventually(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(fd), &appsv1.Deployment{}) }).Should(Succeed())
		Eventually(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(fd), &corev1.Service{}) }).Should(Succeed())
		Eventually(func() (*v1beta1.Flagd, error) {
			got := &v1beta1.Flagd{}
			return got, k8s.Get(ctx, client.ObjectKeyFromObject(fd), got)
		}).WithTimeout(podTimeout).Should(And(
			haveCondition(v1beta1.ConditionProgrammed, metav1.ConditionTrue),
			haveCondition(v1beta1.ConditionAvailable, metav1.ConditionTrue)))

		By("the Deployment's pod, mutated by admission and admitted by the API server, runs flagd, which serves the flag")
		pod := readyPod(ctx, ns, "web")
		sidecar := sidecarOf(pod)
		Expect(sidecar.VolumeMounts).To(ContainElement(HaveField("MountPath", injection.FlagMountDir(f))))
		Expect(sidecar.Args).To(ContainElement(ContainSubstring(`"uri":"` + injection.FlagFilePath(f) + `"`)))
		content, err := n.ReadFile(podKey(pod), injection.SidecarName, injection.FlagFilePath(f))
		Expect(err).NotTo(HaveOccurred(), "flagd's file, as the container sees it")
		Expect(string(content)).To(ContainSubstring(fixtures.FlagKey))
		addr, ok := n.Addr(podKey(pod), injection.SidecarName, 8013)
		Expect(ok).To(BeTrue())
		Eventually(func() (flagdapi.Evaluation, error) {
			return flagdapi.Resolve(ctx, addr, flagdapi.Boolean, fixtures.FlagKey, nil)
		}).Should(Equal(flagdapi.Evaluation{Value: true, Variant: "on", Reason: "STATIC"}))

		By("the statuses: Programmed, and the FeatureFlag Ready")
		Eventually(func(g Gomega) {
			got := &v1beta1.FeatureFlagSource{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(src), got)).To(Succeed())
			for _, c := range []string{v1beta1.ConditionAccepted, v1beta1.ConditionResolvedRefs, v1beta1.ConditionProgrammed} {
				g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, c)).To(BeTrue(), "%s: %v", c, got.Status.Conditions)
			}
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			got := &v1beta1.FeatureFlag{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), got)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, v1beta1.ConditionReady)).To(BeTrue(), "%v", got.Status.Conditions)
		}).Should(Succeed())
	})

	It("a Flagd of 64 characters, which its Service cannot carry, is refused up front: Accepted False, nothing generated", func(ctx SpecContext) {
		ns := newLongNamespace(ctx)
		src := fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("flags")})
		fd := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "f" + strings.Repeat("d", 63)}}
		fd.Spec.FeatureFlagSource = src.Name
		create(ctx, fixtures.FlagSet(ns, "flags", "on"), src, fd)
		Eventually(func() (*v1beta1.Flagd, error) {
			got := &v1beta1.Flagd{}
			return got, k8s.Get(ctx, client.ObjectKeyFromObject(fd), got)
		}).Should(haveCondition(v1beta1.ConditionAccepted, metav1.ConditionFalse, v1beta1.ReasonInvalid))
		Consistently(func() error {
			return k8s.Get(ctx, client.ObjectKeyFromObject(fd), &appsv1.Deployment{})
		}).WithTimeout(2 * time.Second).Should(HaveOccurred())
	})
})

// podTimeout bounds a pod's start on the test node.
const podTimeout = 90 * time.Second

func create(ctx context.Context, objs ...client.Object) {
	GinkgoHelper()
	for _, o := range objs {
		Expect(k8s.Create(ctx, o)).To(Succeed(), "creating %T %s", o, o.GetName())
	}
}

// deployment is a one-replica Deployment of an idle app, labelled app=web
// (a label value has at most 63 characters; the name has more).
func deployment(ns, name string) *appsv1.Deployment {
	d := fixtures.Deployment(ns, name, nil, nil)
	d.Spec.Selector.MatchLabels = map[string]string{"app": "web"}
	d.Spec.Template.Labels = map[string]string{"app": "web"}
	d.Spec.Template.Spec.Containers[0].Image = "example.com/shop/web:1.0"
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	return d
}

func podKey(pod *corev1.Pod) k8stypes.NamespacedName {
	return k8stypes.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
}

// readyPod waits until the app has exactly one pod, Ready, admitted with
// flagplane's injection (a pod admitted before its source was seen is
// rolled by the healer; this waits for its successor).
func readyPod(ctx context.Context, ns, app string) *corev1.Pod {
	GinkgoHelper()
	var pod corev1.Pod
	Eventually(func(g Gomega) {
		var list corev1.PodList
		g.Expect(k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
		var live []corev1.Pod
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		g.Expect(live).To(ConsistOf(And(
			HaveField("ObjectMeta.Annotations", HaveKey(restarts.AnnotationInjection)),
			HaveField("Status.Conditions", ContainElement(And(HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue)))))))
		pod = live[0]
	}).WithTimeout(podTimeout).Should(Succeed(), "the pod of %s never came up Ready with its flagd", app)
	return &pod
}

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

func haveCondition(t string, s metav1.ConditionStatus, reason ...string) types.GomegaMatcher {
	m := And(Not(BeNil()), HaveField("Status", s))
	if len(reason) > 0 {
		m = And(m, HaveField("Reason", reason[0]))
	}
	return WithTransform(func(f *v1beta1.Flagd) *metav1.Condition {
		c := meta.FindStatusCondition(f.Status.Conditions, t)
		if c != nil && c.ObservedGeneration != f.Generation {
			return nil // about an older spec
		}
		return c
	}, m)
}
