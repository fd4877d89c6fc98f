package topology

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
)

// variantRendering renders a test flag set to its "new-ui" default
// variant, which is also its revision: "off" is invalid.
func variantRendering(ff *v1beta1.FeatureFlag) Rendered {
	v := ff.Spec.FlagSpec.Flags["new-ui"].DefaultVariant
	if v == "broken" {
		return Rendered{Err: errTest("flagd cannot load it")}
	}
	return Rendered{Content: `{"default":"` + v + `"}`, Revision: v, Size: len(v)}
}

type errTest string

func (e errTest) Error() string { return string(e) }

func rolloutPolicy(ns, name, flagSet string, steps ...deliveryv1alpha1.RolloutStep) *deliveryv1alpha1.FeatureFlagRolloutPolicy {
	return &deliveryv1alpha1.FeatureFlagRolloutPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
			TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: "core.openfeature.dev", Kind: "FeatureFlag", Name: flagSet},
			Steps:     steps,
		},
	}
}

func withStatus(p *deliveryv1alpha1.FeatureFlagRolloutPolicy, stable, target string, phase deliveryv1alpha1.RolloutPhase, step int32) *deliveryv1alpha1.FeatureFlagRolloutPolicy {
	c := p.DeepCopy()
	c.Status = deliveryv1alpha1.FeatureFlagRolloutPolicyStatus{StableRevision: stable, TargetRevision: target, Phase: phase, Step: step}
	return c
}

func revisionObject(ns, flagSet string, number int64, variant string) *deliveryv1alpha1.FeatureFlagRevision {
	return &deliveryv1alpha1.FeatureFlagRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: flagSet + "-" + variant},
		Spec: deliveryv1alpha1.FeatureFlagRevisionSpec{FlagSet: flagSet, Number: number, Revision: variant,
			FlagSpec: newFlagSet(ns, flagSet, variant).Spec.FlagSpec},
	}
}

// stagedCluster: flag set flags in ns "flags", consumed with the file
// provider by a Deployment in each of the namespaces a, b, c, d (a source
// per namespace, naming flags/flags, with a grant letting them).
func stagedCluster(t *testing.T, variant string) *Topology {
	t.Helper()
	must := must(t)
	topo := New(WithFlagSetRendering(variantRendering))
	must(topo.UpsertFlagSet(newFlagSet("flags", "flags", variant)))
	grant := &Grant{Namespace: "flags", Name: "all", To: []GrantTo{{Group: "core.openfeature.dev", Kind: "FeatureFlag"}}}
	for _, ns := range []string{"a", "b", "c", "d"} {
		grant.From = append(grant.From, GrantFrom{Group: "core.openfeature.dev", Kind: "FeatureFlagSource", Namespace: ns})
	}
	must(topo.UpsertGrant(*grant))
	for _, ns := range []string{"a", "b", "c", "d"} {
		must(topo.UpsertSource(newSource(ns, "src", ref("flags/flags", v1beta1.SyncProviderFile), selector(matchLabels("app", "web")))))
		must(topo.UpsertWorkload(deployment(ns, "web", map[string]string{"app": "web", "tier": ns}, nil)))
		topo.UpsertNamespace(ns, map[string]string{"stage": map[string]string{"a": "canary", "b": "early"}[ns]})
	}
	return topo
}

func planned(v *View) map[string]string {
	out := map[string]string{}
	for _, ns := range []string{"a", "b", "c", "d"} {
		s, _ := v.ServedFor(fsK("flags", "flags"), ns)
		out[ns] = s.Revision
		if s.Held {
			out[ns] = "held:" + s.Revision
		}
	}
	return out
}

func TestRolloutPlanStagesAnEdit(t *testing.T) {
	g := NewWithT(t)
	must := must(t)
	topo := stagedCluster(t, "v1")
	f := fsK("flags", "flags")
	policy := rolloutPolicy("flags", "staged", "flags",
		deliveryv1alpha1.RolloutStep{NamespaceSelector: matchLabels("stage", "canary")},
		deliveryv1alpha1.RolloutStep{WorkloadSelector: matchLabels("tier", "b")},
		deliveryv1alpha1.RolloutStep{Percentage: ptr.To[int32](100)},
	)
	d := must(topo.UpsertRolloutPolicy(policy))
	g.Expect(d.Has(f)).To(BeTrue())
	g.Expect(d.Has(cmK(f, "a"))).To(BeTrue(), "the ConfigMaps read the plan")

	// No plan recorded yet: the current rendering is stable.
	plan := topo.Snapshot().RolloutPlan(f)
	g.Expect(plan.Problem).To(BeEmpty())
	g.Expect(plan.NewPlan).To(BeTrue())
	g.Expect(planned(topo.Snapshot())).To(Equal(map[string]string{"a": "v1", "b": "v1", "c": "v1", "d": "v1"}))

	// The workflow records it; then an edit.
	must(topo.UpsertRolloutPolicy(withStatus(policy, "v1", "v1", deliveryv1alpha1.PhaseCompleted, 3)))
	topo.UpsertRevision(revisionObject("flags", "flags", 1, "v1"))
	must(topo.UpsertFlagSet(newFlagSet("flags", "flags", "v2")))
	plan = topo.Snapshot().RolloutPlan(f)
	g.Expect(plan.NewPlan).To(BeTrue())
	g.Expect(plan.Stable).To(Equal("v1"))
	g.Expect(plan.Target).To(Equal("v2"))
	g.Expect(planned(topo.Snapshot())).To(Equal(map[string]string{"a": "v2", "b": "v1", "c": "v1", "d": "v1"}),
		"step 0 selects the namespace labelled canary; the rest serve the stable revision")
	s, _ := topo.Snapshot().ServedFor(f, "b")
	g.Expect(s.Content).To(Equal(`{"default":"v1"}`), "the stable revision's content, from its recorded revision")

	// The workflow records the plan and moves to step 1: the namespace of
	// the workload labelled tier=b.
	must(topo.UpsertRolloutPolicy(withStatus(policy, "v1", "v2", deliveryv1alpha1.PhaseProgressing, 1)))
	g.Expect(planned(topo.Snapshot())).To(Equal(map[string]string{"a": "v2", "b": "v2", "c": "v1", "d": "v1"}))

	// A gate fails: everyone back to the stable revision.
	must(topo.UpsertRolloutPolicy(withStatus(policy, "v1", "v2", deliveryv1alpha1.PhaseHalted, 1)))
	g.Expect(planned(topo.Snapshot())).To(Equal(map[string]string{"a": "v1", "b": "v1", "c": "v1", "d": "v1"}))

	// An invalid edit changes no one's plan.
	must(topo.UpsertRolloutPolicy(withStatus(policy, "v1", "v2", deliveryv1alpha1.PhaseProgressing, 1)))
	topo.UpsertRevision(revisionObject("flags", "flags", 2, "v2"))
	must(topo.UpsertFlagSet(newFlagSet("flags", "flags", "broken")))
	g.Expect(topo.Snapshot().RolloutPlan(f).NewPlan).To(BeFalse())
	g.Expect(planned(topo.Snapshot())).To(Equal(map[string]string{"a": "v2", "b": "v2", "c": "v1", "d": "v1"}),
		"both revisions come from their recorded revisions")

	// An edit during the rollout: a new plan from the stable revision.
	must(topo.UpsertFlagSet(newFlagSet("flags", "flags", "v3")))
	plan = topo.Snapshot().RolloutPlan(f)
	g.Expect(plan.NewPlan).To(BeTrue())
	g.Expect(plan.Replaced).To(Equal("v2"))
	g.Expect(planned(topo.Snapshot())).To(Equal(map[string]string{"a": "v3", "b": "v1", "c": "v1", "d": "v1"}))

	// Completed: everyone.
	must(topo.UpsertRolloutPolicy(withStatus(policy, "v1", "v3", deliveryv1alpha1.PhaseCompleted, 3)))
	g.Expect(planned(topo.Snapshot())).To(Equal(map[string]string{"a": "v3", "b": "v3", "c": "v3", "d": "v3"}))

	// The policy goes: the current rendering everywhere.
	d = topo.DeleteRolloutPolicy("flags", "staged")
	g.Expect(d.Has(cmK(f, "d"))).To(BeTrue())
	g.Expect(topo.Snapshot().RolloutPlan(f)).To(BeNil())
}

func TestRolloutPlanHoldsWhatItCannotServe(t *testing.T) {
	g := NewWithT(t)
	must := must(t)
	topo := stagedCluster(t, "v2")
	f := fsK("flags", "flags")
	policy := rolloutPolicy("flags", "staged", "flags", deliveryv1alpha1.RolloutStep{Percentage: ptr.To[int32](50)})
	must(topo.UpsertRolloutPolicy(withStatus(policy, "v1", "v2", deliveryv1alpha1.PhaseProgressing, 0)))
	got := planned(topo.Snapshot())
	held := 0
	for _, r := range got {
		if r == "held:v1" {
			held++
		}
	}
	g.Expect(held).To(Equal(2), "half the consumers are planned at v1, whose content is not known: they keep theirs; %v", got)

	// The revision is recorded: they serve it. The Delta says so.
	d := topo.UpsertRevision(revisionObject("flags", "flags", 1, "v1"))
	g.Expect(d.Has(cmK(f, "a"))).To(BeTrue())
	got = planned(topo.Snapshot())
	g.Expect(got).To(HaveLen(4))
	count := map[string]int{}
	for _, r := range got {
		count[r]++
	}
	g.Expect(count).To(Equal(map[string]int{"v1": 2, "v2": 2}))

	// A revision object whose spec is not the hash it claims is not served.
	forged := revisionObject("flags", "flags", 9, "v3")
	forged.Name, forged.Spec.Revision = "flags-forged", "v0"
	topo.UpsertRevision(forged)
	must(topo.UpsertRolloutPolicy(withStatus(policy, "v0", "v2", deliveryv1alpha1.PhaseProgressing, 0)))
	for _, r := range planned(topo.Snapshot()) {
		g.Expect(r).To(BeElementOf("v2", "held:v0"), "the forged v0 is held, never served as v3's content")
	}
	must(topo.UpsertRolloutPolicy(withStatus(policy, "v1", "v2", deliveryv1alpha1.PhaseProgressing, 0)))

	// The same half, whatever the order the graph learnt them in.
	rebuilt := stagedCluster(t, "v2")
	rebuilt.UpsertRevision(revisionObject("flags", "flags", 1, "v1"))
	must(rebuilt.UpsertRolloutPolicy(withStatus(policy, "v1", "v2", deliveryv1alpha1.PhaseProgressing, 0)))
	g.Expect(planned(rebuilt.Snapshot())).To(Equal(got))
}

func TestRolloutPlanRefusesKubernetesReaders(t *testing.T) {
	g := NewWithT(t)
	must := must(t)
	topo := stagedCluster(t, "v1")
	f := fsK("flags", "flags")
	must(topo.UpsertSource(newSource("c", "src", ref("flags/flags", v1beta1.SyncProviderKubernetes), selector(matchLabels("app", "web")))))
	policy := rolloutPolicy("flags", "staged", "flags", deliveryv1alpha1.RolloutStep{Percentage: ptr.To[int32](50)})
	must(topo.UpsertRolloutPolicy(withStatus(policy, "v1", "v1", deliveryv1alpha1.PhaseCompleted, 1)))
	must(topo.UpsertFlagSet(newFlagSet("flags", "flags", "v2")))
	plan := topo.Snapshot().RolloutPlan(f)
	g.Expect(plan.ProblemReason).To(Equal(deliveryv1alpha1.ReasonUnstageableConsumers))
	g.Expect(plan.Unstaged).To(Equal([]Key{depK("c", "web")}))
	g.Expect(planned(topo.Snapshot())).To(Equal(map[string]string{"a": "v2", "b": "v2", "c": "v2", "d": "v2"}),
		"a policy not in force stages nothing")
}
