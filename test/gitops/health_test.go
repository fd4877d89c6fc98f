package gitops

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/workflows/injection"
)

// The kstatus statuses, and what Argo CD calls them.
const (
	current    = "Current"
	inProgress = "InProgress"
	failed     = "Failed"
)

var _ = Describe("Health: kstatus, kubectl wait, Argo CD and Flux read every state of every kind", func() {
	It("Current when delivered: a flag set in its workloads' ConfigMaps, its source, a serving Flagd, an in-process configuration, a policy", func(ctx SpecContext) {
		ns := newNamespace(ctx, "healthy")
		ff := fixtures.FlagSet(ns, "flags", "on")
		src := fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("flags")})
		web := fixtures.Deployment(ns, "web", nil, map[string]string{
			v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "src"})
		fd := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flagd"}, Spec: v1beta1.FlagdSpec{FeatureFlagSource: "src"}}
		ipc := &v1beta1.InProcessConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "in-process"}}
		pol := policy(ns, "defaults", ns)
		create(ctx, ff, src, web, fd, ipc, pol)

		// The policy's default (--debug) may roll the Flagd's pods once: its
		// health is read once its Deployment runs that, rollout over.
		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(fd), d)).To(Succeed())
			g.Expect(d.Spec.Template.Spec.Containers).To(ContainElement(HaveField("Args", ContainElement("--debug"))))
			g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
			g.Expect([]int32{d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas}).To(Equal([]int32{1, 1, 1}))
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(fd), fd)).To(Succeed())
			g.Expect(fd.Status.Replicas).To(BeEquivalentTo(1))
		}).Should(Succeed())
		for _, obj := range []client.Object{ff, src, fd, ipc, pol} {
			u := currentVersion(ctx, obj)
			expectToolsOn(u, current)
			expectSummaryOn(u, v1beta1.ConditionReady)
		}
		delivered, _, _ := unstructured.NestedString(live(ctx, ff).Object, "status", "delivered")
		Expect(allDelivered(delivered)).To(BeTrue(), "Current only once every ConfigMap holds the revision: %q", delivered)

		By("kubectl wait --for=condition=Ready, for every kind at once")
		kubectl("wait", "-n", ns, "--for=condition=Ready", "--timeout=60s",
			"featureflag/flags", "featureflagsource/src", "flagd/flagd", "inprocessconfiguration/in-process",
			"featureflagsourcepolicies.policy.flagplane.dev/defaults")
	})

	It("InProgress while a flag set a source names may still appear; kubectl wait returns once it does", func(ctx SpecContext) {
		ns := newNamespace(ctx, "missing")
		src := fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("later")})
		fd := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flagd"}, Spec: v1beta1.FlagdSpec{FeatureFlagSource: "nosuch"}}
		create(ctx, src, fd)
		Eventually(health(ctx, src)).Should(And(HavePrefix(inProgress), ContainSubstring("FeatureFlag "+ns+"/later not found")))
		Eventually(health(ctx, fd)).Should(And(HavePrefix(inProgress), ContainSubstring("does not exist")))
		Consistently(health(ctx, src)).Should(HavePrefix(inProgress), "waiting is not failing")
		for _, obj := range []client.Object{src, fd} {
			expectTools(ctx, obj, inProgress)
			expectSummary(ctx, obj, v1beta1.ConditionReconciling)
		}
		out, err := cp.Kubectl("wait", "-n", ns, "--for=condition=Ready", "--timeout=2s", "featureflagsource/src")
		Expect(err).To(HaveOccurred(), "kubectl wait must not return for a source that is not Ready: %s", out)

		By("the flag set appears")
		create(ctx, fixtures.FlagSet(ns, "later", "on"))
		kubectl("wait", "-n", ns, "--for=condition=Ready", "--timeout=60s", "featureflagsource/src")
		Expect(health(ctx, src)()).To(HavePrefix(current))
		expectTools(ctx, src, current)
	})

	It("Failed when only a user can fix it: tenancy forbids the reference; a ReferenceGrant makes it Current", func(ctx SpecContext) {
		owner, consumer := newNamespace(ctx, "owner"), newNamespace(ctx, "consumer")
		create(ctx, fixtures.FlagSet(owner, "shared", "on"), fixtures.Source(owner, "shared-src", []v1beta1.Source{fixtures.FileRef("shared")}))
		src := fixtures.Source(consumer, "src", []v1beta1.Source{fixtures.FileRef(owner + "/shared")})
		fd := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: consumer, Name: "flagd"}, Spec: v1beta1.FlagdSpec{FeatureFlagSource: owner + "/shared-src"}}
		create(ctx, src, fd)
		for _, obj := range []client.Object{src, fd} {
			Eventually(health(ctx, obj)).Should(And(HavePrefix(failed), ContainSubstring("ReferenceGrant")), "%T", obj)
			expectTools(ctx, obj, failed)
			expectSummary(ctx, obj, v1beta1.ConditionStalled)
		}
		kubectl("wait", "-n", consumer, "--for=condition=Stalled", "--timeout=10s", "featureflagsource/src", "flagd/flagd")

		By("the owner grants the flag set to the consumer's sources")
		grant := fixtures.Grant("v1beta1", owner, "to-consumer",
			[]fixtures.GrantRef{{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagSourceKind, Name: consumer},
				{Group: v1beta1.GroupVersion.Group, Kind: "Flagd", Name: consumer}},
			[]fixtures.GrantRef{{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind, Name: "shared"},
				{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagSourceKind, Name: "shared-src"}})
		Expect(k8s.Create(ctx, grant)).To(Succeed())
		Eventually(health(ctx, src)).Should(HavePrefix(current))
		Eventually(health(ctx, fd)).Should(HavePrefix(current))
		expectTools(ctx, src, current)
	})

	It("Failed while a name flagplane generates is taken by an object it does not manage, for the source and the flag set it cannot deliver", func(ctx SpecContext) {
		ns := newNamespace(ctx, "taken")
		foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flagd." + ns + ".flags"},
			Data: map[string]string{"mine": "yes"}}
		ff := fixtures.FlagSet(ns, "flags", "on")
		src := fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("flags")})
		web := fixtures.Deployment(ns, "web", nil, map[string]string{
			v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "src"})
		foreignService := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flagd"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "web", Port: 80}}}}
		fd := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flagd"}, Spec: v1beta1.FlagdSpec{FeatureFlagSource: "src"}}
		create(ctx, foreign, foreignService, ff, src, web, fd)
		Eventually(health(ctx, src)).Should(And(HavePrefix(failed), ContainSubstring("not managed by flagplane")))
		Eventually(health(ctx, fd)).Should(And(HavePrefix(failed), ContainSubstring("Service "+ns+"/flagd exists and is not managed by flagplane")))
		expectTools(ctx, fd, failed)
		Eventually(health(ctx, ff)).Should(And(HavePrefix(failed), ContainSubstring("ConfigMap "+ns+"/"+foreign.Name+" exists and is not managed by flagplane")))
		for _, obj := range []client.Object{src, ff} {
			expectTools(ctx, obj, failed)
			expectSummary(ctx, obj, v1beta1.ConditionStalled)
		}

		By("the user removes the foreign ConfigMap; the healer rolls web, whose pod was admitted without the flag set, and the new pod's flagd serves it")
		Expect(k8s.Delete(ctx, foreign)).To(Succeed())
		// Two flagds serve the flag set once it is written: web's new pod's
		// sidecar, and the pod of the Flagd, whose Deployment does not wait
		// on its Service (the name still taken). Which confirms first is a
		// race, so the spec waits for both: a run that caught web's alone
		// read 1/1 for a moment, and one where they started together read
		// 2/2 and never 1/1.
		Eventually(func() (string, error) {
			got := &v1beta1.FeatureFlag{}
			err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), got)
			return got.Status.Confirmed, err
		}).WithTimeout(2 * time.Minute).Should(Equal("2/2"))
		Eventually(health(ctx, src)).Should(HavePrefix(current))
		Eventually(health(ctx, ff)).Should(HavePrefix(current))
		expectTools(ctx, ff, current)
	})

	It("InProgress while a Flagd has no ready pod, and Current once one serves", func(ctx SpecContext) {
		ns := newNamespace(ctx, "unavailable")
		src := fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("flags")}, func(s *v1beta1.FeatureFlagSource) {
			// More CPU than the node has: the pod stays Pending.
			s.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000")}
		})
		fd := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flagd"}, Spec: v1beta1.FlagdSpec{FeatureFlagSource: "src"}}
		create(ctx, fixtures.FlagSet(ns, "flags", "on"), src, fd)
		Eventually(health(ctx, fd)).Should(And(HavePrefix(inProgress), ContainSubstring("0 of 1 flagd replicas ready")))
		expectTools(ctx, fd, inProgress)
		expectSummary(ctx, fd, v1beta1.ConditionReconciling)

		By("the source asks for what the node has")
		Eventually(func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
				return err
			}
			src.Spec.Resources.Requests = nil
			return k8s.Update(ctx, src)
		}).Should(Succeed())
		Eventually(health(ctx, fd)).Should(HavePrefix(current))
		expectTools(ctx, fd, current)
	})

	It("Failed for what admission refuses, when it got in before flagplane's admission was installed: an invalid flag set, source and policy", func(ctx SpecContext) {
		ns := newNamespace(ctx, "invalid")
		ff := fixtures.FlagSet(ns, "flags", "purple") // a default variant the flag does not have
		src := fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("flags")})
		badSelector := fixtures.Source(ns, "bad-selector", []v1beta1.Source{fixtures.FileRef("flags")}, func(s *v1beta1.FeatureFlagSource) {
			s.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "not a valid value!"}}
		})
		web := fixtures.Deployment(ns, "web", nil, map[string]string{
			v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "src"})
		elsewhere := policy(ns, "elsewhere", "kube-system")
		// A name the API server takes and its Service could not have: no
		// webhook checks a Flagd, its status says it.
		badFlagd := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "1-flagd"},
			Spec: v1beta1.FlagdSpec{FeatureFlagSource: "src"}}
		withoutValidation(ctx, func() { create(ctx, ff, src, badSelector, web) })
		create(ctx, elsewhere, badFlagd)

		Eventually(health(ctx, ff)).Should(And(HavePrefix(failed), ContainSubstring("flag set is invalid")))
		Eventually(health(ctx, src)).Should(And(HavePrefix(failed), ContainSubstring("is invalid")))
		Eventually(health(ctx, badSelector)).Should(And(HavePrefix(failed), ContainSubstring("spec.selector")))
		Eventually(health(ctx, elsewhere)).Should(And(HavePrefix(failed), ContainSubstring("governs only the Namespace it lives in")))
		Eventually(health(ctx, badFlagd)).Should(And(HavePrefix(failed), ContainSubstring("names the Service too")))
		for _, obj := range []client.Object{ff, src, badSelector, elsewhere, badFlagd} {
			expectTools(ctx, obj, failed)
			expectSummary(ctx, obj, v1beta1.ConditionStalled)
		}

		By("the owner fixes the flag set")
		setDefaultVariant(ctx, ff, "on")
		Eventually(health(ctx, ff)).Should(HavePrefix(current))
		Eventually(health(ctx, src)).Should(HavePrefix(current))
	})

	It("Current despite what does not keep an object from doing what it asks: probable mistakes, other namespaces' workloads naming a source, a setting another source wins, a policy with no sidecar to govern", func(ctx SpecContext) {
		ns, other := newNamespace(ctx, "notes"), newNamespace(ctx, "other")
		ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "colors"}}
		ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{"color": {State: "ENABLED", DefaultVariant: "blue",
			Variants:  json.RawMessage(`{"red":"#f00","blue":"#00f","green":"#0f0"}`),
			Targeting: json.RawMessage(`{"if":[{"==":[{"var":"tier"},"gold"]},"red",null]}`)}}
		src := fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("colors")})
		// A workload of another namespace names the source; no ReferenceGrant lets it.
		stranger := fixtures.Deployment(other, "web", nil, map[string]string{
			v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: ns + "/src"})
		// Two sources configure one sidecar: one loses its port to the other.
		team := fixtures.Source(ns, "team", []v1beta1.Source{fixtures.FileRef("colors")}, func(s *v1beta1.FeatureFlagSource) { s.Spec.Port = 9013 })
		platform := fixtures.Source(ns, "platform", []v1beta1.Source{fixtures.FileRef("colors")}, func(s *v1beta1.FeatureFlagSource) { s.Spec.Port = 7013 })
		shared := fixtures.Deployment(ns, "shared", nil, map[string]string{
			v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "team,platform"})
		// A policy of a namespace where no workload has a sidecar.
		idle := newNamespace(ctx, "idle")
		pol := policy(idle, "defaults", idle)
		create(ctx, ff, src, stranger, team, platform, shared, pol)
		Eventually(condition(ctx, ff, v1beta1.ConditionConsistent)).Should(HavePrefix("False/" + v1beta1.ReasonProbableMistakes))
		Eventually(condition(ctx, src, v1beta1.ConditionReferrersPermitted)).Should(HavePrefix("False/" + v1beta1.ReasonRefNotPermitted))
		Eventually(func() []string {
			return []string{condition(ctx, team, v1beta1.ConditionProgrammed)(), condition(ctx, platform, v1beta1.ConditionProgrammed)()}
		}).Should(ContainElement("True/" + v1beta1.ReasonSettingsConflict))
		Eventually(condition(ctx, pol, policyv1alpha1.ConditionEnforced)).Should(Equal("False/" + policyv1alpha1.ReasonNoSidecars))
		for _, obj := range []client.Object{ff, src, team, platform, pol} {
			u := currentVersion(ctx, obj)
			expectToolsOn(u, current)
			expectSummaryOn(u, v1beta1.ConditionReady)
		}
	})

	It("InProgress while a pod's flagd does not serve the revision written for it, Failed past the bound, Current once it does", func(ctx SpecContext) {
		ns := newNamespace(ctx, "confirm")
		ff := fixtures.FlagSet(ns, "flags", "on")
		src := fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("flags")})
		web := fixtures.Deployment(ns, "web", nil, map[string]string{
			v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "src"})
		create(ctx, ff, src, web)
		Eventually(func() (string, error) {
			var got v1beta1.FeatureFlag
			err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), &got)
			return got.Status.Confirmed, err
		}).Should(Equal("1/1"), "its pod's flagd serves it")
		Eventually(health(ctx, ff)).Should(HavePrefix(current))
		var pods corev1.PodList
		Expect(k8s.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
		Expect(pods.Items).To(HaveLen(1))
		pid, ok := n.PID(k8stypes.NamespacedName{Namespace: ns, Name: pods.Items[0].Name}, injection.SidecarName)
		Expect(ok).To(BeTrue())

		By("its flagd stops answering (SIGSTOP), and the flag set is edited")
		Expect(syscall.Kill(pid, syscall.SIGSTOP)).To(Succeed())
		stopped := true
		defer func() {
			if stopped {
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
		}()
		setDefaultVariant(ctx, ff, "off")
		Eventually(condition(ctx, ff, v1beta1.ConditionReady)).Should(Equal("False/" + v1beta1.ReasonConfirming))
		delivered, _, _ := unstructured.NestedString(live(ctx, ff).Object, "status", "delivered")
		Expect(delivered).To(Equal("1/1"), "written")
		Expect(health(ctx, ff)()).To(HavePrefix(inProgress))
		expectVerdict(ctx, ff, verdict{kstatus: inProgress, argo: argoStatus[inProgress]})

		By("past --confirm-bound")
		Eventually(condition(ctx, ff, v1beta1.ConditionReady)).WithTimeout(time.Minute).Should(Equal("False/" + v1beta1.ReasonNotConfirmed))
		Expect(health(ctx, ff)()).To(HavePrefix(failed))
		expectVerdict(ctx, ff, verdict{kstatus: failed, argo: argoStatus[failed]})

		By("it answers again (SIGCONT)")
		Expect(syscall.Kill(pid, syscall.SIGCONT)).To(Succeed())
		stopped = false
		Eventually(health(ctx, ff)).WithTimeout(time.Minute).Should(HavePrefix(current))
		expectTools(ctx, ff, current)
	})

	It("agrees with the flag set's delivery in every status it writes during an edit", func(ctx SpecContext) {
		ns := newNamespace(ctx, "edit")
		ff := fixtures.FlagSet(ns, "flags", "on")
		src := fixtures.Source(ns, "src", []v1beta1.Source{fixtures.FileRef("flags")})
		var workloads []client.Object
		for _, name := range []string{"a", "b", "c"} {
			workloads = append(workloads, fixtures.Deployment(ns, name, nil, map[string]string{
				v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "src"}))
		}
		create(ctx, append([]client.Object{ff, src}, workloads...)...)
		Eventually(func() (string, error) {
			var got v1beta1.FeatureFlag
			err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), &got)
			return got.Status.Confirmed, err
		}).Should(Equal("3/3"), "the three pods' flagd serve it")
		Eventually(health(ctx, ff)).Should(HavePrefix(current))

		By("watching the FeatureFlag through an edit")
		watcher, err := client.NewWithWatch(cp.Config, client.Options{Scheme: cp.Scheme})
		Expect(err).NotTo(HaveOccurred())
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(v1beta1.GroupVersion.WithKind("FeatureFlagList"))
		w, err := watcher.Watch(ctx, list, client.InNamespace(ns))
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		setDefaultVariant(ctx, ff, "off")
		seen := map[string]int{}
		Eventually(func() string {
			for {
				select {
				case ev := <-w.ResultChan():
					u, ok := ev.Object.(*unstructured.Unstructured)
					if !ok {
						continue
					}
					got := kstatusOf(u)
					delivered, _, _ := unstructured.NestedString(u.Object, "status", "delivered")
					confirmed, _, _ := unstructured.NestedString(u.Object, "status", "confirmed")
					obs, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
					gen := u.GetGeneration()
					switch {
					case obs != gen:
						Expect(got).To(HavePrefix(inProgress), "generation %d not observed yet", gen)
					case delivered != "" && !allDelivered(delivered):
						Expect(got).To(HavePrefix(inProgress), "delivered %s", delivered)
						expectToolsOn(u, inProgress)
					case confirmed != "" && !allDelivered(confirmed):
						// Written, and not served by every pod yet.
						Expect(got).To(HavePrefix(inProgress), "confirmed %s", confirmed)
						expectToolsOn(u, inProgress)
						seen["written, not yet confirmed"]++
					default:
						Expect(got).To(HavePrefix(current), "delivered %s, confirmed %s", delivered, confirmed)
						Expect(confirmed).To(Equal("3/3"), "Current once the pods' flagd serve the revision")
						expectToolsOn(u, current)
					}
					seen[strings.SplitN(got, ":", 2)[0]]++
					if strings.HasPrefix(got, current) && obs == gen && gen > 1 {
						return current
					}
				default:
					return ""
				}
			}
		}).Should(Equal(current))
		AddReportEntry("kstatus of the FeatureFlag's versions during the edit", seen)
	})
})

// policy is a FeatureFlagSourcePolicy of namespace ns that targets the
// Namespace target, with one default.
func policy(ns, name, target string) *policyv1alpha1.FeatureFlagSourcePolicy {
	return &policyv1alpha1.FeatureFlagSourcePolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: policyv1alpha1.FeatureFlagSourcePolicySpec{
			TargetRef: policyv1alpha1.PolicyTargetReference{Kind: "Namespace", Name: target},
			Defaults:  &policyv1alpha1.SourceSettingsBlock{SourceSettings: policyv1alpha1.SourceSettings{DebugLogging: ptr.To(true)}},
		},
	}
}

func create(ctx context.Context, objs ...client.Object) {
	GinkgoHelper()
	for _, o := range objs {
		Expect(k8s.Create(ctx, o)).To(Succeed(), "creating %T %s", o, o.GetName())
	}
}

// health is kstatus's verdict on obj as the API server holds it.
func health(ctx context.Context, obj client.Object) func() (string, error) {
	return func() (string, error) { return fixtures.KStatus(ctx, k8s, cp.Scheme, obj) }
}

// expectSummary checks that exactly the summary condition t is True, and
// that all three judge the object's current generation.
func expectSummary(ctx context.Context, obj client.Object, t string) {
	GinkgoHelper()
	expectSummaryOn(live(ctx, obj), t)
}

// expectSummaryOn is expectSummary on one version of an object.
func expectSummaryOn(u *unstructured.Unstructured, t string) {
	GinkgoHelper()
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	got := map[string]string{}
	for _, c := range conds {
		m := c.(map[string]any)
		switch m["type"] {
		case v1beta1.ConditionReady, v1beta1.ConditionReconciling, v1beta1.ConditionStalled:
			got[m["type"].(string)] = m["status"].(string)
			Expect(m["observedGeneration"]).To(BeEquivalentTo(u.GetGeneration()), "%s of %s", m["type"], u.GetName())
		}
	}
	want := map[string]string{v1beta1.ConditionReady: "False", v1beta1.ConditionReconciling: "False", v1beta1.ConditionStalled: "False"}
	want[t] = "True"
	Expect(got).To(Equal(want), "%s %s", u.GetKind(), u.GetName())
}

// currentVersion is obj as the API server holds it once kstatus calls it
// Current: the one version the readers of health and the summary are
// then checked on, so that a change between two reads (a new consumer's
// pod, which its flag set waits for again) cannot set them apart.
func currentVersion(ctx context.Context, obj client.Object) *unstructured.Unstructured {
	GinkgoHelper()
	var u *unstructured.Unstructured
	Eventually(func() string { u = live(ctx, obj); return kstatusOf(u) }).Should(HavePrefix(current), "%T %s", obj, obj.GetName())
	return u
}

// withoutValidation runs create with flagplane's validating webhook
// removed, as objects made before flagplane was installed got in, and puts
// it back.
func withoutValidation(ctx context.Context, create func()) {
	GinkgoHelper()
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: "flagplane-validator"}, vwc)).To(Succeed())
	Expect(k8s.Delete(ctx, vwc)).To(Succeed())
	defer func() {
		GinkgoHelper()
		vwc.ResourceVersion, vwc.UID, vwc.CreationTimestamp, vwc.ManagedFields = "", "", metav1.Time{}, nil
		Expect(k8s.Create(ctx, vwc)).To(Succeed())
	}()
	// The API server's webhook configuration follows its informer.
	Eventually(func() error {
		probe := fixtures.FlagSet(vwc.Namespace, "", "purple")
		probe.Namespace, probe.GenerateName = "default", "probe-"
		if err := k8s.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		return nil
	}).Should(Succeed())
	create()
}

// setDefaultVariant edits the default variant of the flag of a fixtures
// flag set, retrying on conflicts.
func setDefaultVariant(ctx context.Context, ff *v1beta1.FeatureFlag, variant string) {
	GinkgoHelper()
	Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), ff); err != nil {
			return err
		}
		f := ff.Spec.FlagSpec.Flags[fixtures.FlagKey]
		f.DefaultVariant = variant
		ff.Spec.FlagSpec.Flags[fixtures.FlagKey] = f
		return k8s.Update(ctx, ff)
	}).Should(Succeed())
}
