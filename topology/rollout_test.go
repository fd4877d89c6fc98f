package topology

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// TestRolloutPlanFailsClosedOnKubernetesReaders: a reader of the
// FeatureFlag that no plan can stage (provider kubernetes), added in a
// consumer namespace, is listed, and every other consumer keeps what the
// plan gives it: after a halt or an abort the stable revision, mid-step
// the target only where the step reached. (Before, such a reader made the
// policy stage nothing, and every consumer got the halted revision.)
func TestRolloutPlanFailsClosedOnKubernetesReaders(t *testing.T) {
	must := must(t)
	f := fsK("flags", "flags")
	policy := rolloutPolicy("flags", "staged", "flags",
		deliveryv1alpha1.RolloutStep{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"stage": "canary"}}},
		deliveryv1alpha1.RolloutStep{Percentage: ptr.To[int32](100)})
	for _, tt := range []struct {
		phase deliveryv1alpha1.RolloutPhase
		want  map[string]string
	}{
		{deliveryv1alpha1.PhaseHalted, map[string]string{"a": "v1", "b": "v1", "c": "v1", "d": "v1"}},
		{deliveryv1alpha1.PhaseAborted, map[string]string{"a": "v1", "b": "v1", "c": "v1", "d": "v1"}},
		{deliveryv1alpha1.PhaseProgressing, map[string]string{"a": "v2", "b": "v1", "c": "v1", "d": "v1"}},
		{deliveryv1alpha1.PhasePaused, map[string]string{"a": "v2", "b": "v1", "c": "v1", "d": "v1"}},
	} {
		t.Run(string(tt.phase), func(t *testing.T) {
			g := NewWithT(t)
			topo := stagedCluster(t, "v2")
			topo.UpsertRevision(revisionObject("flags", "flags", 1, "v1"))
			must(topo.UpsertRolloutPolicy(withStatus(policy, "v1", "v2", tt.phase, 0)))
			g.Expect(planned(topo.Snapshot())).To(Equal(tt.want))

			// A tenant adds a kubernetes-provider reader in a consumer namespace.
			must(topo.UpsertSource(newSource("d", "kube", ref("flags/flags", v1beta1.SyncProviderKubernetes), selector(matchLabels("app", "reader")))))
			must(topo.UpsertWorkload(deployment("d", "reader", map[string]string{"app": "reader"}, nil)))
			plan := topo.Snapshot().RolloutPlan(f)
			g.Expect(plan.Problem).To(BeEmpty())
			g.Expect(plan.Unstaged).To(Equal([]Key{depK("d", "reader")}))
			g.Expect(planned(topo.Snapshot())).To(Equal(tt.want), "the reader releases nothing")

			// A reader there from the start: the same plan.
			rebuilt := stagedCluster(t, "v2")
			must(rebuilt.UpsertSource(newSource("d", "kube", ref("flags/flags", v1beta1.SyncProviderKubernetes), selector(matchLabels("app", "reader")))))
			must(rebuilt.UpsertWorkload(deployment("d", "reader", map[string]string{"app": "reader"}, nil)))
			rebuilt.UpsertRevision(revisionObject("flags", "flags", 1, "v1"))
			must(rebuilt.UpsertRolloutPolicy(withStatus(policy, "v1", "v2", tt.phase, 0)))
			g.Expect(planned(rebuilt.Snapshot())).To(Equal(tt.want))
		})
	}
}

// TestRolloutPlanHoldsARolloutPastItsSteps: steps removed while the
// rollout stood at one of them hold every consumer at the stable revision
// (Halt says why), where before the rollout went on to everyone.
func TestRolloutPlanHoldsARolloutPastItsSteps(t *testing.T) {
	g := NewWithT(t)
	must := must(t)
	topo := stagedCluster(t, "v2")
	topo.UpsertRevision(revisionObject("flags", "flags", 1, "v1"))
	three := rolloutPolicy("flags", "staged", "flags",
		deliveryv1alpha1.RolloutStep{Percentage: ptr.To[int32](25)},
		deliveryv1alpha1.RolloutStep{Percentage: ptr.To[int32](50)},
		deliveryv1alpha1.RolloutStep{Percentage: ptr.To[int32](75)})
	must(topo.UpsertRolloutPolicy(withStatus(three, "v1", "v2", deliveryv1alpha1.PhasePaused, 2)))
	served := 0
	for _, r := range planned(topo.Snapshot()) {
		if r == "v2" {
			served++
		}
	}
	g.Expect(served).To(Equal(3))
	one := withStatus(three, "v1", "v2", deliveryv1alpha1.PhasePaused, 2)
	one.Spec.Steps = one.Spec.Steps[:1]
	must(topo.UpsertRolloutPolicy(one))
	plan := topo.Snapshot().RolloutPlan(fsK("flags", "flags"))
	g.Expect(plan.Halt).To(Equal("the policy now has 1 step(s), and the rollout stood at step 3"))
	g.Expect(planned(topo.Snapshot())).To(Equal(map[string]string{"a": "v1", "b": "v1", "c": "v1", "d": "v1"}))
}

// TestRolloutPlanOfAPercentageOutOfRange: a percentage outside 0–100,
// which the schema refuses, selects as its nearer bound does; a negative
// one made planning panic (found by FuzzRolloutPolicyValidator).
func TestRolloutPlanOfAPercentageOutOfRange(t *testing.T) {
	topo := stagedCluster(t, "v2")
	for _, tc := range []struct {
		percent int32
		selects int
	}{{-2147483648, 0}, {-200, 0}, {-1, 0}, {0, 0}, {100, 4}, {101, 4}, {2147483647, 4}} {
		p := rolloutPolicy("flags", "staged", "flags", deliveryv1alpha1.RolloutStep{Percentage: ptr.To(tc.percent)})
		var selects []string
		NewWithT(t).Expect(func() { selects = topo.Snapshot().StepSelects(p, 0) }).NotTo(Panic(), "percentage %d", tc.percent)
		NewWithT(t).Expect(selects).To(HaveLen(tc.selects), "percentage %d", tc.percent)
		NewWithT(t).Expect(func() { topo.Snapshot().PlanFor(p) }).NotTo(Panic(), "percentage %d", tc.percent)
	}
}

// owned makes a revision object controlled by the FeatureFlag of uid
// ("" leaves it without an owner, as a delete with --cascade=orphan does).
func owned(r *deliveryv1alpha1.FeatureFlagRevision, name string, uid types.UID) *deliveryv1alpha1.FeatureFlagRevision {
	r = r.DeepCopy()
	r.Name = name
	if uid != "" {
		r.OwnerReferences = []metav1.OwnerReference{{APIVersion: "core.openfeature.dev/v1beta1", Kind: "FeatureFlag", Name: r.Spec.FlagSet,
			UID: uid, Controller: ptr.To(true)}}
	}
	return r
}

// TestRolloutPlanServesTheRevisionThatQualifies: of the objects that claim
// a revision, one that is the flag set's own (its controller is the
// FeatureFlag the graph holds) and renders to what it claims is served,
// whatever sorts or arrived first: a forged or foreign one never blocks
// it. (Before, the first object seen of a hash stood for all of them.)
func TestRolloutPlanServesTheRevisionThatQualifies(t *testing.T) {
	must := must(t)
	f := fsK("flags", "flags")
	policy := withStatus(rolloutPolicy("flags", "staged", "flags", deliveryv1alpha1.RolloutStep{Percentage: ptr.To[int32](50)}),
		"v1", "v2", deliveryv1alpha1.PhaseHalted, 0)
	forged := revisionObject("flags", "flags", 1, "v3")
	forged.Spec.Revision = "v1" // claims v1, holds v3
	foreign := revisionObject("flags", "flags", 1, "v1")
	real := revisionObject("flags", "flags", 2, "v1")
	world := func(revisions ...*deliveryv1alpha1.FeatureFlagRevision) *Topology {
		topo := stagedCluster(t, "v2")
		ff := newFlagSet("flags", "flags", "v2")
		ff.UID = "ff-uid"
		must(topo.UpsertFlagSet(ff))
		must(topo.UpsertRolloutPolicy(policy))
		for _, r := range revisions {
			topo.UpsertRevision(r)
		}
		return topo
	}
	held := map[string]string{"a": "held:v1", "b": "held:v1", "c": "held:v1", "d": "held:v1"}
	stable := map[string]string{"a": "v1", "b": "v1", "c": "v1", "d": "v1"}

	g := NewWithT(t)
	topo := world(owned(forged, "flags-a", "ff-uid"), owned(foreign, "flags-b", ""), owned(foreign, "flags-c", "earlier-uid"))
	g.Expect(planned(topo.Snapshot())).To(Equal(held), "forged content, no owner, another FeatureFlag's: none is served")
	d := topo.UpsertRevision(owned(real, "flags-d", "ff-uid"))
	g.Expect(d.Has(cmK(f, "a"))).To(BeTrue())
	g.Expect(planned(topo.Snapshot())).To(Equal(stable), "the flag set's own revision is served past the forged one")

	// In any order, the same; and adopting the orphan (its owner set) serves it.
	g.Expect(planned(world(owned(real, "flags-d", "ff-uid"), owned(forged, "flags-a", "ff-uid")).Snapshot())).To(Equal(stable))
	orphaned := world(owned(foreign, "flags-b", ""))
	g.Expect(planned(orphaned.Snapshot())).To(Equal(held))
	orphaned.UpsertRevision(owned(foreign, "flags-b", "ff-uid"))
	g.Expect(planned(orphaned.Snapshot())).To(Equal(stable), "adopted")
	orphaned.DeleteRevision("flags", "flags-b", "flags", "v1")
	g.Expect(planned(orphaned.Snapshot())).To(Equal(held))
}

// hexRendering renders a test flag set as variantRendering does, with
// revisions as flagplane makes them: 32 hex digits of a hash.
func hexRendering(ff *v1beta1.FeatureFlag) Rendered {
	r := variantRendering(ff)
	if r.Valid() {
		sum := sha256.Sum256([]byte(r.Content))
		r.Revision = hex.EncodeToString(sum[:16])
	}
	return r
}

// TestRolloutPlanReadsLegacyRevisions: a status and revisions recorded by
// an earlier version, with 48-bit revisions, name the same contents as the
// full revisions of now: the plan goes on where it stood, with the full
// revisions, and starts no new rollout.
func TestRolloutPlanReadsLegacyRevisions(t *testing.T) {
	g := NewWithT(t)
	must := must(t)
	f := fsK("flags", "flags")
	topo := New(WithFlagSetRendering(hexRendering))
	must(topo.UpsertFlagSet(newFlagSet("flags", "flags", "v2")))
	must(topo.UpsertSource(newSource("flags", "src", ref("flags/flags", v1beta1.SyncProviderFile), selector(matchLabels("app", "web")))))
	must(topo.UpsertWorkload(deployment("flags", "web", map[string]string{"app": "web"}, nil)))
	v1, v2 := hexRendering(newFlagSet("flags", "flags", "v1")).Revision, hexRendering(newFlagSet("flags", "flags", "v2")).Revision
	legacy := revisionObject("flags", "flags", 1, "v1")
	legacy.Spec.Revision = v1[:12]
	topo.UpsertRevision(legacy)
	policy := withStatus(rolloutPolicy("flags", "staged", "flags", deliveryv1alpha1.RolloutStep{Percentage: ptr.To[int32](100)}),
		v1[:12], v2[:12], deliveryv1alpha1.PhaseHalted, 0)
	must(topo.UpsertRolloutPolicy(policy))
	plan := topo.Snapshot().RolloutPlan(f)
	g.Expect(plan.NewPlan).To(BeFalse(), "the same target")
	g.Expect([]string{plan.Stable, plan.Target}).To(Equal([]string{v1, v2}))
	s, _ := topo.Snapshot().ServedFor(f, "flags")
	g.Expect(s.Held).To(BeFalse())
	g.Expect(s.Revision).To(Equal(v1))

	// A content that only shares the first 12 digits is another revision.
	g.Expect(SameRevision(v1[:12], v1)).To(BeTrue())
	g.Expect(SameRevision(v1[:12]+"0", v1)).To(BeFalse())
	g.Expect(SameRevision(v1, v1[:12]+strings.Repeat("0", 20))).To(BeFalse(), "two full revisions are compared whole")
}

// A member is given a policy whose steps select clusters: it stages
// nothing there, says why, and every consumer gets each edit as without a
// policy.
func TestRolloutPlanOfClusterStepsStagesNothing(t *testing.T) {
	g := NewWithT(t)
	must := must(t)
	topo := stagedCluster(t, "v1")
	f := fsK("flags", "flags")
	policy := rolloutPolicy("flags", "fleet", "flags",
		deliveryv1alpha1.RolloutStep{ClusterSelector: matchLabels("env", "dev")})
	must(topo.UpsertRolloutPolicy(withStatus(policy, "v1", "v1", deliveryv1alpha1.PhaseCompleted, 1)))
	must(topo.UpsertFlagSet(newFlagSet("flags", "flags", "v2")))
	plan := topo.Snapshot().RolloutPlan(f)
	g.Expect(plan.ProblemReason).To(Equal(deliveryv1alpha1.ReasonClusterSteps))
	g.Expect(plan.Problem).To(ContainSubstring("fleet hub"))
	g.Expect(planned(topo.Snapshot())).To(Equal(map[string]string{"a": "v2", "b": "v2", "c": "v2", "d": "v2"}))
}
