package e2e

import (
	"context"
	"fmt"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/confirm"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/outbound"
)

// flagdSyncPort is flagd's sync port, where the manager asks a sidecar what
// it serves.
const flagdSyncPort = 8015

// flagdServes is the revision of FeatureFlag ns/name that the flagd
// sidecar of pod serves, as flagd itself answers ("" when it answers with
// none, or several).
func flagdServes(ctx context.Context, pod *corev1.Pod, ns, name string) (string, error) {
	addr, ok := n.Addr(key(pod), injection.SidecarName, flagdSyncPort)
	if !ok {
		return "", fmt.Errorf("no host port for the sync port of pod %s", pod.Name)
	}
	s, err := confirm.Read(ctx, outbound.New(outbound.Client{}), addr)
	if err != nil {
		return "", err
	}
	fs := s.FlagSets[ns+"/"+name]
	if len(fs.Revisions) != 1 {
		return "", nil
	}
	return fs.Revisions[0], nil
}

func flagSetStatus(ctx context.Context, ff *v1beta1.FeatureFlag) func() (v1beta1.FeatureFlagStatus, error) {
	return func() (v1beta1.FeatureFlagStatus, error) {
		var got v1beta1.FeatureFlag
		err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), &got)
		return got.Status, err
	}
}

// confirmedIn is the revision status says every pod of namespace serves,
// as their flagd answered ("" when not every pod does).
func confirmedIn(st v1beta1.FeatureFlagStatus, namespace string) string {
	for _, s := range st.Serving {
		if s.Namespace == namespace && s.Pods > 0 && s.Confirmed == s.Pods {
			return s.Revision
		}
	}
	return ""
}

func readyReason(st v1beta1.FeatureFlagStatus) string {
	if c := meta.FindStatusCondition(st.Conditions, v1beta1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

var _ = Describe("confirmed delivery", func() {
	It("says a pod serves a revision only once its flagd answers with it; a flagd that does not answer keeps the flag set from Ready, Stalled past the bound with an Event naming the pod, and Ready once it answers", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ff := flagSet(ns, "checkout", "off")
		// Without probes: the kubelet would restart the flagd this spec
		// stops (SIGSTOP) once its liveness probe has failed long enough,
		// which under load came before the status's bound had passed.
		noProbes := func(s *v1beta1.FeatureFlagSource) { s.Spec.ProbesEnabled = ptr.To(false) }
		create(ctx, ff, source(ns, "flags", "web", fixtures.FileRef("checkout"), noProbes), deployment(ns, "web", appImage, nil))
		pod := readyPod(ctx, ns, "web")
		Eventually(resolve(flagdAddr(pod))).Should(Equal(evaluated("off")))
		Eventually(flagSetStatus(ctx, ff)).Should(And(HaveField("Confirmed", "1/1"),
			WithTransform(readyReason, Equal(v1beta1.ReasonReady))))

		By("three edits, status and flagd read side by side: status never says the pod serves a revision its flagd does not answer with")
		ahead, confirmedSeen := 0, 0
		for i, variant := range []string{"on", "off", "on"} {
			setVariant(ctx, ff, variant)
			var st v1beta1.FeatureFlagStatus
			deadline := time.Now().Add(time.Minute)
			for time.Now().Before(deadline) {
				var err error
				st, err = flagSetStatus(ctx, ff)()
				Expect(err).NotTo(HaveOccurred())
				// A status of this edit that says the pod serves its
				// revision; flagd read after it, so that flagd cannot have
				// caught up meanwhile. (The third edit's revision is the
				// first's: a reading of the pod from before the second edit
				// must not confirm it.)
				if rev := confirmedIn(st, ns); rev != "" && st.ObservedGeneration == ff.Generation && rev == st.Revision {
					served, err := flagdServes(ctx, pod, ns, "checkout")
					Expect(err).NotTo(HaveOccurred())
					if served != rev {
						ahead++
						AddReportEntry(fmt.Sprintf("edit %d: status says %s, flagd serves %s", i+1, rev, served))
					}
					confirmedSeen++
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			Expect(confirmedIn(st, ns)).To(Equal(st.Revision), "edit %d confirmed within a minute", i+1)
		}
		Expect(ahead).To(BeZero(), "moments where status ran ahead of flagd")
		Expect(confirmedSeen).To(Equal(3))

		By("the pod's flagd stops answering (SIGSTOP), and the flag set is edited")
		pid := pidOf(pod, injection.SidecarName)
		Expect(syscall.Kill(pid, syscall.SIGSTOP)).To(Succeed())
		stopped := true
		defer func() {
			if stopped {
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
		}()
		setVariant(ctx, ff, "off")
		Eventually(flagSetStatus(ctx, ff)).Should(And(
			HaveField("ObservedGeneration", ff.Generation),
			HaveField("Delivered", "1/1"), HaveField("Confirmed", "0/1"),
			HaveField("Serving", ContainElement(And(HaveField("Namespace", ns), HaveField("Pods", int32(1)), HaveField("Confirmed", int32(0)),
				HaveField("Reason", ContainSubstring("pod "+pod.Name)))))),
			"written, not confirmed")
		Expect(flagSetStatus(ctx, ff)()).To(WithTransform(readyReason, Equal(v1beta1.ReasonConfirming)))
		Eventually(flagSetStatus(ctx, ff)).WithTimeout(time.Minute).Should(And(
			WithTransform(readyReason, Equal(v1beta1.ReasonNotConfirmed)),
			HaveField("Conditions", ContainElement(And(HaveField("Type", v1beta1.ConditionStalled), HaveField("Status", metav1.ConditionTrue),
				HaveField("Message", And(ContainSubstring("pod "+pod.Name), ContainSubstring("no answer within"))))))),
			"past the bound: Stalled, with what the read of its flagd found")
		Eventually(eventsAbout(ctx, ns, v1beta1.FeatureFlagKind, "checkout")).Should(ContainElement(And(
			HaveField("Reason", v1beta1.ReasonNotConfirmed), HaveField("Type", corev1.EventTypeWarning),
			HaveField("Note", ContainSubstring("pod "+pod.Name)))))

		By("it answers again (SIGCONT): confirmed, Ready")
		Expect(syscall.Kill(pid, syscall.SIGCONT)).To(Succeed())
		stopped = false
		Eventually(flagSetStatus(ctx, ff)).WithTimeout(time.Minute).Should(And(HaveField("Confirmed", "1/1"),
			WithTransform(readyReason, Equal(v1beta1.ReasonReady))))
		Expect(resolveOnce(flagdAddr(pod))).To(Equal(evaluated("off")))
	})

	It("starts a rollout step's pause and gates only once the canary's pods serve the revision, as their flagd answers", func(ctx SpecContext) {
		sw := newStagedWorld(ctx, v1beta1.SyncProviderFile)
		policy := &deliveryv1alpha1.FeatureFlagRolloutPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: sw.flags, Name: "checkout"},
			Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
				TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind, Name: "checkout"},
				Steps: []deliveryv1alpha1.RolloutStep{
					{Name: "canary", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"stage": "canary"}}, Approval: true},
					{Name: "everyone", Percentage: ptr.To[int32](100)},
				},
			},
		}
		create(ctx, policy)
		Eventually(rolloutOf(ctx, policy)).Should(HaveField("Phase", deliveryv1alpha1.PhaseCompleted))

		By("the canary's flagd stops answering; an edit is written to the canary's ConfigMap")
		canary := sw.pods[sw.canary]
		pid := pidOf(canary, injection.SidecarName)
		Expect(syscall.Kill(pid, syscall.SIGSTOP)).To(Succeed())
		stopped := true
		defer func() {
			if stopped {
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
		}()
		setVariant(ctx, sw.ff, "on")
		cm := topology.ConfigMapName(topology.FlagSetKey(sw.flags, "checkout"))
		Eventually(func() (string, error) {
			var got corev1.ConfigMap
			err := k8s.Get(ctx, client.ObjectKey{Namespace: sw.canary, Name: cm}, &got)
			return got.Data[topology.ConfigMapDataKey(topology.FlagSetKey(sw.flags, "checkout"))], err
		}).Should(ContainSubstring(`"defaultVariant":"on"`), "written")
		waiting := And(
			HaveField("Phase", deliveryv1alpha1.PhaseProgressing), HaveField("StepServedAt", BeNil()),
			HaveField("Message", ContainSubstring("0 of 1 consumers serve revision")))
		Eventually(rolloutOf(ctx, policy)).Should(waiting)
		Consistently(rolloutOf(ctx, policy)).WithTimeout(5*time.Second).Should(waiting, "the step waits for the canary's flagd")

		By("it answers: the step is served, and waits for approval")
		Expect(syscall.Kill(pid, syscall.SIGCONT)).To(Succeed())
		stopped = false
		Eventually(rolloutOf(ctx, policy)).Should(And(HaveField("Phase", deliveryv1alpha1.PhasePaused),
			HaveField("StepServedAt", Not(BeNil())), HaveField("Message", ContainSubstring("waiting for approval"))))
		Expect(resolveOnce(sw.addrs[sw.canary])).To(Equal(evaluated("on")))
	})
})
