package topology

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
)

// TestRolloutPlanProperties drives a staged flag set through random
// events (edits, invalid edits, recorded revisions, the policy's status,
// namespace and workload labels, consumers coming and going, the policy
// itself) and checks after each one that:
//
//   - no consumer is given a revision outside the plan: the stable or the
//     target revision while a plan is staged (or it is held, keeping what
//     it has), the flag set's rendering otherwise;
//   - a halted or aborted plan gives every consumer the stable revision;
//   - step membership, against an oracle of the test's own (which
//     namespaces carry stage=canary, which workloads tier=early), never
//     the plan's step numbers: while a rollout runs at step s, the target
//     reaches the canary namespaces from step 0, the early workloads'
//     from step 1, at most half the consumers more at step 2, and
//     everyone at step 3; no consumer of a later step gets it early, and
//     a kubernetes-provider reader changes none of it;
//
// and at the end that the graph plans exactly as one built from scratch
// from the final objects, in another order.
func TestRolloutPlanProperties(t *testing.T) {
	mixed := 0
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { mixed += rolloutProperties(t, seed) })
	}
	// The events must reach what the properties are about: consumers of
	// one flag set served two revisions at once.
	NewWithT(t).Expect(mixed).To(BeNumerically(">", 100))
}

func rolloutProperties(t *testing.T, seed uint64) (mixed int) {
	g := NewWithT(t)
	rng := rand.New(rand.NewPCG(seed, 30))
	namespaces := []string{"a", "b", "c", "d", "e"}
	variants := []string{"v1", "v2", "v3", "v4", "broken"}
	phases := []deliveryv1alpha1.RolloutPhase{deliveryv1alpha1.PhaseProgressing, deliveryv1alpha1.PhasePaused,
		deliveryv1alpha1.PhaseHalted, deliveryv1alpha1.PhaseAborted, deliveryv1alpha1.PhaseCompleted}
	f := fsK("flags", "flags")

	// The final objects, by kind, as the events leave them.
	state := struct {
		flagSet    *v1beta1.FeatureFlag
		policy     *deliveryv1alpha1.FeatureFlagRolloutPolicy
		revisions  map[string]*deliveryv1alpha1.FeatureFlagRevision
		nsLabels   map[string]map[string]string
		workloads  map[string]Workload
		sources    map[string]*v1beta1.FeatureFlagSource
		grant      Grant
		kubeSource string
	}{revisions: map[string]*deliveryv1alpha1.FeatureFlagRevision{}, nsLabels: map[string]map[string]string{},
		workloads: map[string]Workload{}, sources: map[string]*v1beta1.FeatureFlagSource{}}

	topo := New(WithFlagSetRendering(variantRendering))
	must := must(t)
	state.flagSet = newFlagSet("flags", "flags", "v1")
	must(topo.UpsertFlagSet(state.flagSet))
	state.grant = Grant{Namespace: "flags", Name: "all", To: []GrantTo{{Group: "core.openfeature.dev", Kind: "FeatureFlag"}}}
	for _, ns := range namespaces {
		state.grant.From = append(state.grant.From, GrantFrom{Group: "core.openfeature.dev", Kind: "FeatureFlagSource", Namespace: ns})
	}
	must(topo.UpsertGrant(state.grant))
	newPolicy := func() *deliveryv1alpha1.FeatureFlagRolloutPolicy {
		return rolloutPolicy("flags", "staged", "flags",
			deliveryv1alpha1.RolloutStep{NamespaceSelector: matchLabels("stage", "canary")},
			deliveryv1alpha1.RolloutStep{WorkloadSelector: matchLabels("tier", "early")},
			deliveryv1alpha1.RolloutStep{Percentage: ptr.To[int32](50)},
			deliveryv1alpha1.RolloutStep{Percentage: ptr.To[int32](100)})
	}
	state.policy = newPolicy()
	must(topo.UpsertRolloutPolicy(state.policy))

	// member is the test's own answer to whether namespace ns gets the
	// target of a running plan at its step (exact), or may (not exact: a
	// percentage step's share, which is a hash order's).
	member := func(plan *RolloutPlan, ns string) (want, exact bool) {
		if plan.Target == plan.Stable {
			return true, true
		}
		switch {
		case plan.Halt != "", plan.Phase == deliveryv1alpha1.PhaseHalted, plan.Phase == deliveryv1alpha1.PhaseAborted:
			return false, true
		case plan.Phase == deliveryv1alpha1.PhaseCompleted:
			return true, true
		}
		w, consumer := state.workloads[ns]
		if !consumer {
			return false, true // not a consumer: it gets the target when the rollout completes
		}
		canary := state.nsLabels[ns]["stage"] == "canary"
		early := w.Labels["tier"] == "early"
		switch s := plan.Step; {
		case canary || (early && s >= 1) || s >= 3:
			return true, true
		case s == 2:
			return false, false
		}
		return false, true
	}
	check := func(v *View, step int) {
		t.Helper()
		r, _ := v.FlagSetRendered(f)
		plan := v.RolloutPlan(f)
		seen := map[string]bool{}
		defer func() {
			if len(seen) > 1 {
				mixed++
			}
		}()
		extra := 0
		defer func() {
			if plan.Staged() && plan.Step == 2 && (plan.Phase == deliveryv1alpha1.PhaseProgressing || plan.Phase == deliveryv1alpha1.PhasePaused) && plan.Halt == "" {
				// Step 2 (50 %) adds at most half the consumers to those of
				// the steps before.
				g.Expect(extra).To(BeNumerically("<=", (len(state.workloads)+1)/2), "event %d: step 2 served %d more", step, extra)
			}
		}()
		for _, ns := range namespaces {
			s, ok := v.ServedFor(f, ns)
			g.Expect(ok).To(BeTrue())
			if !plan.Staged() {
				g.Expect(s.Revision).To(Equal(r.Revision), "event %d: no plan in force, namespace %s serves the rendering", step, ns)
				continue
			}
			g.Expect(s.Revision).To(BeElementOf(plan.Stable, plan.Target), "event %d: namespace %s outside the plan %+v", step, ns, plan)
			if !s.Held && s.Valid() {
				seen[s.Revision] = true
			}
			if plan.Phase == deliveryv1alpha1.PhaseHalted || plan.Phase == deliveryv1alpha1.PhaseAborted || plan.Halt != "" {
				g.Expect(s.Revision).To(Equal(plan.Stable), "event %d: a halted plan serves the stable revision", step)
			}
			if want, exact := member(plan, ns); exact {
				g.Expect(s.Revision == plan.Target).To(Equal(want), "event %d: namespace %s at step %d of %s (stable %s, target %s)",
					step, ns, plan.Step, plan.Phase, plan.Stable, plan.Target)
			} else if s.Revision == plan.Target {
				extra++
			}
			if !s.Held && s.Valid() {
				g.Expect(s.Content).To(Equal(`{"default":"`+s.Revision+`"}`), "event %d: the content is the planned revision's", step)
			}
		}
	}

	for step := range 120 {
		switch rng.IntN(9) {
		case 0: // an edit, maybe invalid
			ff := state.flagSet.DeepCopy()
			fl := ff.Spec.FlagSpec.Flags["new-ui"]
			fl.DefaultVariant = variants[rng.IntN(len(variants))]
			ff.Spec.FlagSpec.Flags["new-ui"] = fl
			state.flagSet = ff
			must(topo.UpsertFlagSet(ff))
		case 1: // a revision recorded
			v := variants[rng.IntN(len(variants)-1)]
			if _, ok := state.revisions[v]; !ok {
				state.revisions[v] = revisionObject("flags", "flags", int64(len(state.revisions)+1), v)
				topo.UpsertRevision(state.revisions[v])
			}
		case 2: // the workflow writes the status
			if state.policy == nil {
				continue
			}
			p := state.policy.DeepCopy()
			stable, target := variants[rng.IntN(4)], variants[rng.IntN(4)]
			p.Status = deliveryv1alpha1.FeatureFlagRolloutPolicyStatus{StableRevision: stable, TargetRevision: target,
				Phase: phases[rng.IntN(len(phases))], Step: int32(rng.IntN(5))}
			state.policy = p
			must(topo.UpsertRolloutPolicy(p))
		case 3: // namespace labels
			ns := namespaces[rng.IntN(len(namespaces))]
			l := map[string]string{"stage": []string{"canary", "late", ""}[rng.IntN(3)]}
			state.nsLabels[ns] = l
			topo.UpsertNamespace(ns, l)
		case 4: // a consumer comes, or its labels change
			ns := namespaces[rng.IntN(len(namespaces))]
			w := deployment(ns, "web", map[string]string{"app": "web", "tier": []string{"early", "late"}[rng.IntN(2)]}, nil)
			state.workloads[ns] = w
			must(topo.UpsertWorkload(w))
			if _, ok := state.sources[ns]; !ok {
				state.sources[ns] = newSource(ns, "src", ref("flags/flags", v1beta1.SyncProviderFile), selector(matchLabels("app", "web")))
				must(topo.UpsertSource(state.sources[ns]))
			}
		case 5: // a consumer goes
			ns := namespaces[rng.IntN(len(namespaces))]
			if _, ok := state.workloads[ns]; ok {
				delete(state.workloads, ns)
				topo.DeleteWorkload(depK(ns, "web"))
			}
		case 6: // the policy goes, or comes back
			if state.policy != nil && rng.IntN(3) == 0 {
				state.policy = nil
				topo.DeleteRolloutPolicy("flags", "staged")
			} else if state.policy == nil {
				state.policy = newPolicy()
				must(topo.UpsertRolloutPolicy(state.policy))
			}
		case 7: // a reader of its own comes or goes (provider kubernetes)
			if state.kubeSource == "" {
				state.kubeSource = namespaces[rng.IntN(len(namespaces))]
				must(topo.UpsertSource(newSource(state.kubeSource, "kube", ref("flags/flags", v1beta1.SyncProviderKubernetes), selector(matchLabels("app", "web")))))
			} else {
				topo.DeleteSource(state.kubeSource, "kube")
				state.kubeSource = ""
			}
		case 8: // a revision's object deleted
			for v, r := range state.revisions {
				topo.DeleteRevision(r.Namespace, r.Name, r.Spec.FlagSet, r.Spec.Revision)
				delete(state.revisions, v)
				break
			}
		}
		if state.policy == nil && rng.IntN(2) == 0 {
			state.policy = newPolicy()
			must(topo.UpsertRolloutPolicy(state.policy))
		}
		check(topo.Snapshot(), step)
	}

	// Rebuilt from scratch, in another order: the same plan, the same content.
	rebuilt := New(WithFlagSetRendering(variantRendering))
	for _, r := range state.revisions {
		rebuilt.UpsertRevision(r)
	}
	if state.policy != nil {
		must(rebuilt.UpsertRolloutPolicy(state.policy))
	}
	for ns, l := range state.nsLabels {
		rebuilt.UpsertNamespace(ns, l)
	}
	for _, w := range state.workloads {
		must(rebuilt.UpsertWorkload(w))
	}
	keys := make([]string, 0, len(state.sources))
	for ns := range state.sources {
		keys = append(keys, ns)
	}
	slices.Reverse(keys)
	for _, ns := range keys {
		must(rebuilt.UpsertSource(state.sources[ns]))
	}
	if state.kubeSource != "" {
		must(rebuilt.UpsertSource(newSource(state.kubeSource, "kube", ref("flags/flags", v1beta1.SyncProviderKubernetes), selector(matchLabels("app", "web")))))
	}
	must(rebuilt.UpsertGrant(state.grant))
	must(rebuilt.UpsertFlagSet(state.flagSet))
	a, b := topo.Snapshot(), rebuilt.Snapshot()
	for _, ns := range namespaces {
		sa, _ := a.ServedFor(f, ns)
		sb, _ := b.ServedFor(f, ns)
		g.Expect(sb).To(Equal(sa), "namespace %s: incremental and rebuilt graphs plan alike", ns)
	}
	pa, pb := a.RolloutPlan(f), b.RolloutPlan(f)
	g.Expect(pb).To(Equal(pa))
	return mixed
}
