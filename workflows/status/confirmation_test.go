package status

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/confirm"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/internal/workflowstest"
	"github.com/flagplane/flagplane/workflows/manifests"
)

// confirmObserved answers Confirm with what its pods serve, per namespace.
type confirmObserved struct {
	workflowstest.Applied
	now     time.Time
	serving map[string]func(revision string, held bool) v1beta1.NamespaceServing
	asked   map[string][]topology.Key
}

func (c confirmObserved) Confirm(f topology.Key, namespace string, readers []topology.Key, revision string, flags int, held bool) Serving {
	c.asked[namespace] = readers
	return Serving{NamespaceServing: c.serving[namespace](revision, held)}
}
func (c confirmObserved) ConfirmBound() time.Duration { return DefaultConfirmBound }
func (c confirmObserved) ConfirmNow() time.Time       { return c.now }

// TestReadyWaitsForConfirmation: a FeatureFlag whose ConfigMaps hold its
// revision is Ready only once every pod that reads it answers with it;
// until then Reconciling (Confirming), past the bound Stalled
// (NotConfirmed), naming the namespace, the pod and what its flagd
// answered.
func TestReadyWaitsForConfirmation(t *testing.T) {
	g := NewWithT(t)
	topo := topology.New(workflows.DefaultSettings().FlagSets.TopologyOptions()...)
	g.Expect(manifests.Load(topo, strings.NewReader(`apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {namespace: shop, name: flags, generation: 1}
spec: {flagSpec: {flags: {f: {state: ENABLED, variants: {"on": true}, defaultVariant: "on"}}}}
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: shop, name: src}
spec:
  targetRefs: [{group: apps, kind: Deployment, name: web}]
  sources: [{source: flags, provider: file}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: shop, name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: app}]}
`))).To(Succeed())
	v := topo.Snapshot()
	ff, ok := v.FlagSet(topology.FlagSetKey("shop", "flags"))
	g.Expect(ok).To(BeTrue())
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	var revision string
	since := now.Add(-10 * time.Second)
	answer := v1beta1.NamespaceServing{}
	obs := confirmObserved{Applied: workflowstest.Applied{View: v, Settings: workflows.DefaultSettings()}, now: now,
		asked: map[string][]topology.Key{},
		serving: map[string]func(string, bool) v1beta1.NamespaceServing{"shop": func(rev string, held bool) v1beta1.NamespaceServing {
			g.Expect(held).To(BeTrue(), "the applied ConfigMap holds the revision")
			revision = rev
			out := answer
			out.Namespace, out.Revision, out.Since = "shop", rev, &metav1.Time{Time: since}
			return out
		}}}
	ready := func() (*metav1.Condition, v1beta1.FeatureFlagStatus) {
		st := DesiredFlagSet(v, ff, obs)
		return meta.FindStatusCondition(st.Conditions, v1beta1.ConditionReady), st
	}

	By := func(string) {}
	By("one pod of two serves the revision, ten seconds after its copy got it")
	answer = v1beta1.NamespaceServing{Pods: 2, Confirmed: 1, Others: []v1beta1.RevisionPods{{Revision: "0123456789abcdef", Pods: 1}},
		Reason: "pod web-2: flagd serves revision 01234567 of FeatureFlag shop/flags"}
	c, st := ready()
	g.Expect(obs.asked["shop"]).To(Equal([]topology.Key{topology.WorkloadKey(topology.KindDeployment, "shop", "web")}))
	g.Expect(st.Delivered).To(Equal("1/1"), "written")
	g.Expect(st.Confirmed).To(Equal("1/2"))
	g.Expect(revision).To(Equal(st.Revision))
	g.Expect(st.Serving).To(HaveLen(1))
	g.Expect(*c).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", v1beta1.ReasonConfirming),
		HaveField("Message", And(ContainSubstring("namespace shop: 1 of 2 pods"), ContainSubstring("pod web-2: flagd serves revision 01234567")))))
	g.Expect(meta.IsStatusConditionTrue(st.Conditions, v1beta1.ConditionReconciling)).To(BeTrue())

	By("past the bound")
	since = now.Add(-DefaultConfirmBound - time.Second)
	c, st = ready()
	g.Expect(*c).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", v1beta1.ReasonNotConfirmed),
		HaveField("Message", And(ContainSubstring("pod web-2: flagd serves revision 01234567"), ContainSubstring("for more than 3m0s")))))
	g.Expect(meta.IsStatusConditionTrue(st.Conditions, v1beta1.ConditionStalled)).To(BeTrue())

	By("both pods serve it")
	answer = v1beta1.NamespaceServing{Pods: 2, Confirmed: 2}
	c, st = ready()
	g.Expect(st.Confirmed).To(Equal("2/2"))
	g.Expect(*c).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("served by 2/2 pods"))))

	By("no pod has an IP yet: nothing is counted, and Ready says what was written")
	answer = v1beta1.NamespaceServing{Starting: 2}
	c, st = ready()
	g.Expect(st.Confirmed).To(BeEmpty())
	g.Expect(st.Serving).To(BeEmpty())
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue))

	By("without confirmation (--confirm-delivery=false), as before")
	st = DesiredFlagSet(v, ff, obs.Applied)
	g.Expect(st.Confirmed).To(BeEmpty())
	g.Expect(meta.IsStatusConditionTrue(st.Conditions, v1beta1.ConditionReady)).To(BeTrue())
}

// TestConfirmerCountsPods: of the pods of a namespace, the Confirmer counts
// those of the readers (a workload on its sidecar, a Flagd's Deployment on
// its own sync port), asks those it can, and says why it does not ask the
// others; a reading made before the copy got the revision confirms
// nothing, and a pod is asked again.
func TestConfirmerCountsPods(t *testing.T) {
	g := NewWithT(t)
	always := corev1.ContainerRestartPolicyAlways
	sidecar := []corev1.Container{{Name: injection.SidecarName, RestartPolicy: &always}}
	pod := func(name, owner, ip string, mutate ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID(name), Labels: map[string]string{"owner": owner}},
			Spec: corev1.PodSpec{InitContainers: sidecar}, Status: corev1.PodStatus{PodIP: ip}}
		for _, m := range mutate {
			m(p)
		}
		return p
	}
	pods := []client.Object{
		pod("web-1", "web", "10.0.0.1"),
		pod("web-2", "web", "10.0.0.2"),
		pod("web-3", "web", ""),
		pod("web-4", "web", "10.0.0.4", func(p *corev1.Pod) { p.Spec.InitContainers = nil }),
		pod("web-5", "web", "10.0.0.5", func(p *corev1.Pod) { p.Spec.HostNetwork = true }),
		pod("flagd-1", "flagd", "10.0.0.6", func(p *corev1.Pod) { p.Spec.InitContainers = nil }),
		pod("other-1", "other", "10.0.0.7"),
	}
	reader := fake.NewClientBuilder().WithObjects(pods...).Build()
	f := topology.FlagSetKey("flags", "checkout")
	serves := map[string]string{"10.0.0.1:8015": "r2", "10.0.0.2:8015": "r1", "10.0.0.6:9015": "r2"}
	var mu sync.Mutex
	asked := map[string]int{}
	prober := &confirm.Prober{Read: func(_ context.Context, addr string) (confirm.Served, error) {
		mu.Lock()
		asked[addr]++
		rev, ok := serves[addr]
		first := asked[addr] == 1
		mu.Unlock()
		if addr == "10.0.0.2:8015" && first {
			// web-2 answers last, as a busy machine can have it.
			time.Sleep(300 * time.Millisecond)
		}
		if !ok {
			return confirm.Served{}, errors.New("connection refused")
		}
		return confirm.Served{FlagSets: map[string]confirm.FlagSet{"flags/checkout": {Flags: 1, Revisions: []string{rev}}}}, nil
	}}
	prober.Start(t.Context())
	c := &Confirmer{Reader: reader, Prober: prober, FlagdSyncPort: 9015,
		WorkloadOf: func(_ context.Context, p *corev1.Pod) (topology.Key, bool) {
			switch p.Labels["owner"] {
			case "web":
				return topology.WorkloadKey(topology.KindDeployment, "shop", "web"), true
			case "flagd":
				return topology.WorkloadKey(topology.KindDeployment, "shop", "flagd"), true
			}
			return topology.WorkloadKey(topology.KindDeployment, "shop", "other"), true
		}}
	readers := []topology.Key{topology.WorkloadKey(topology.KindDeployment, "shop", "web"), {Kind: topology.KindFlagd, Namespace: "shop", Name: "flagd"}}

	g.Expect(c.confirm(t.Context(), f, "shop", readers, "r2", 1, false)).To(And(
		HaveField("Pods", int32(3)), HaveField("Confirmed", int32(0)), HaveField("Starting", int32(1)), HaveField("NotAsked", int32(2)),
		HaveField("Reason", ContainSubstring("its copy does not hold revision r2 yet"))), "the copy does not hold r2: nobody asked")
	mu.Lock()
	g.Expect(asked).To(BeEmpty())
	mu.Unlock()

	// The copy holds r2: nobody was read yet, so what the three pods
	// serve is not known (Unread), and they are asked.
	g.Expect(c.confirm(t.Context(), f, "shop", readers, "r2", 1, true)).To(And(
		HaveField("Pods", int32(3)), HaveField("Confirmed", int32(0)), HaveField("Unread", int32(3))))

	// The three are read one by one: the count is final once none is
	// unread (web-1 and the Flagd's pod can be counted before web-2 is
	// read).
	var got Serving
	g.Eventually(func() Serving {
		got = c.confirm(t.Context(), f, "shop", readers, "r2", 1, true)
		return got
	}).WithTimeout(5*time.Second).Should(And(HaveField("Confirmed", int32(2)), HaveField("Unread", int32(0))),
		func() string { return fmt.Sprintf("web-1 and the Flagd's pod serve r2, web-2 r1: %+v", got) })
	g.Expect(got).To(And(HaveField("Pods", int32(3)), HaveField("Starting", int32(1)), HaveField("NotAsked", int32(2)), HaveField("Unread", int32(0)),
		HaveField("Others", ConsistOf(v1beta1.RevisionPods{Revision: "r1", Pods: 1})),
		HaveField("Reason", Equal("pod web-2: flagd serves revision r1 of FeatureFlag flags/checkout, not the one its copy holds: not projected into the pod yet, or refused by flagd"))))
	mu.Lock()
	g.Expect(asked).To(HaveKey("10.0.0.1:8015"))
	g.Expect(asked).To(HaveKey("10.0.0.6:9015"), "a Flagd's pod on the Flagd sync port")
	g.Expect(asked).NotTo(HaveKey("10.0.0.5:8015"), "the host's network")
	g.Expect(asked).NotTo(HaveKey("10.0.0.7:8015"), "not a reader")
	mu.Unlock()

	// web-2 serves r2 too: every pod asked is confirmed, and the reason
	// says which pods are not asked and why; they do not hold the count.
	mu.Lock()
	serves["10.0.0.2:8015"] = "r2"
	mu.Unlock()
	g.Eventually(func() Serving {
		return c.confirm(t.Context(), f, "shop", readers, "r2", 1, true)
	}).WithTimeout(30 * time.Second).Should(And(HaveField("Confirmed", int32(3)), HaveField("Pods", int32(3)),
		HaveField("Reason", Equal("pod web-4 has no flagd sidecar (it was created before the sidecar was injected)"))))

	// Another revision, r1, then back to r2: web-1's reading of r2 was
	// made before its copy got r2 again, and confirms nothing until it is
	// read anew.
	c.confirm(t.Context(), f, "shop", readers, "r1", 1, true)
	mu.Lock()
	before := asked["10.0.0.1:8015"]
	serves["10.0.0.1:8015"] = "r1"
	mu.Unlock()
	time.Sleep(10 * time.Millisecond)
	got = c.confirm(t.Context(), f, "shop", readers, "r2", 1, true)
	g.Expect(got.Confirmed).To(BeNumerically("<", 3), "an old reading of r2 does not confirm r2 again")
	g.Eventually(func() int {
		mu.Lock()
		defer mu.Unlock()
		return asked["10.0.0.1:8015"]
	}).Should(BeNumerically(">", before), "web-1 asked again")
}

// TestReadersOfBothProvidersAreNotAsked: a workload that reads a flag set
// from its ConfigMap and with the kubernetes provider serves either copy
// (flagd answers from the source it read last, and the kubernetes one
// names no revision): its pods are not asked, and it counts as unobserved.
func TestReadersOfBothProvidersAreNotAsked(t *testing.T) {
	g := NewWithT(t)
	topo := topology.New(workflows.DefaultSettings().FlagSets.TopologyOptions()...)
	g.Expect(manifests.Load(topo, strings.NewReader(`apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlag
metadata: {namespace: shop, name: flags, generation: 1}
spec: {flagSpec: {flags: {f: {state: ENABLED, variants: {"on": true}, defaultVariant: "on"}}}}
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: shop, name: src}
spec:
  targetRefs: [{group: apps, kind: Deployment, name: web}, {group: apps, kind: Deployment, name: both}]
  sources: [{source: flags, provider: file}]
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {namespace: shop, name: kube}
spec:
  targetRefs: [{group: apps, kind: Deployment, name: both}]
  sources: [{source: flags, provider: kubernetes}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: shop, name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: app}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {namespace: shop, name: both}
spec:
  selector: {matchLabels: {app: both}}
  template:
    metadata: {labels: {app: both}}
    spec: {containers: [{name: app, image: app}]}
`))).To(Succeed())
	v := topo.Snapshot()
	f := topology.FlagSetKey("shop", "flags")
	g.Expect(v.ConsumersOf(f).Readers).To(Equal([]topology.PlanConsumer{{Namespace: "shop",
		Workloads: []topology.Key{topology.WorkloadKey(topology.KindDeployment, "shop", "web")}}}))
	ff, _ := v.FlagSet(f)
	obs := confirmObserved{Applied: workflowstest.Applied{View: v, Settings: workflows.DefaultSettings()}, asked: map[string][]topology.Key{},
		serving: map[string]func(string, bool) v1beta1.NamespaceServing{"shop": func(rev string, _ bool) v1beta1.NamespaceServing {
			return v1beta1.NamespaceServing{Namespace: "shop", Revision: rev, Pods: 1, Confirmed: 1}
		}}}
	st := DesiredFlagSet(v, ff, obs)
	g.Expect(obs.asked["shop"]).To(Equal([]topology.Key{topology.WorkloadKey(topology.KindDeployment, "shop", "web")}))
	g.Expect(st.Unobserved).NotTo(BeNil())
	g.Expect(st.Unobserved.Workloads).To(Equal(int32(1)))
	g.Expect(st.Confirmed).To(Equal("1/1"))
}
