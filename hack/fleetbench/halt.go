package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	fleetwf "github.com/flagplane/flagplane/workflows/fleet"
)

const (
	policyName = "checkout-staged"
	// laggardCluster is a ClusterProfile the hub cannot reach (no access
	// provider; for the simulated members, no namespace of the engine):
	// it never confirms, so gate Confirmed halts every rollout.
	laggardCluster = "laggard"
)

// haltResult is one halt's latencies: from the edit until the bench sees
// the policy Halted, and from then until every copy holds the stable
// spec again, every member serves it, and the hub's placement says every
// cluster but the laggard Current with it.
type haltResult struct{ halted, written, members, hub time.Duration }

// halts measures a halt reaching every cluster. It stages the hub's
// edits with a FeatureFlagRolloutPolicy of one step over every cluster
// and gate Confirmed (for bound), with one more cluster, the laggard,
// that never confirms: each edit reaches every member, then halts once
// bound has passed, and every member returns to the stable revision.
// next is the number of the first edit it makes.
func (f *fleet) halts(ctx context.Context, o options, t trackers, next int, bound time.Duration) ([]haltResult, error) {
	policy := newTracker(1)
	inf, err := f.hubCache.GetInformer(ctx, &deliveryv1alpha1.FeatureFlagRolloutPolicy{})
	if err != nil {
		return nil, err
	}
	seePolicy := func(o any) {
		p, ok := o.(*deliveryv1alpha1.FeatureFlagRolloutPolicy)
		if !ok || p.Name != policyName {
			return
		}
		phase := string(p.Status.Phase) + "/" + p.Status.TargetRevision
		policy.see("policy", func(want string) bool { return phase == want })
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: seePolicy,
		UpdateFunc: func(_, o any) { seePolicy(o) }}); err != nil {
		return nil, err
	}

	f.laggard.Store(laggardCluster)
	if err := f.profile(ctx, laggardCluster); err != nil {
		return nil, err
	}
	var cur v1beta1.FeatureFlag
	if err := f.hubC.Get(ctx, client.ObjectKey{Namespace: teamA, Name: flagSetName}, &cur); err != nil {
		return nil, err
	}
	stable := fleetwf.Revision(&cur)
	policy.reset(string(deliveryv1alpha1.PhaseCompleted) + "/" + stable)
	p := &deliveryv1alpha1.FeatureFlagRolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: policyName, Namespace: teamA},
		Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
			TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: "FeatureFlag", Name: flagSetName},
			Steps: []deliveryv1alpha1.RolloutStep{{Name: "every-cluster",
				ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{selectLabel: "true"}}}},
			Gates: []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GateConfirmed, For: &metav1.Duration{Duration: bound}}}}}
	if err := f.hubC.Create(ctx, p); err != nil {
		return nil, err
	}
	if _, err := policy.wait(ctx, o.timeout); err != nil {
		return nil, fmt.Errorf("the policy taking revision %s as stable: %w", stable, err)
	}

	var out []haltResult
	for i := range o.halts {
		want := flagSet(next + i)
		target := fleetwf.Revision(want)
		policy.reset(string(deliveryv1alpha1.PhaseHalted) + "/" + target)
		t.reset(target)
		began, err := f.update(ctx, want)
		if err != nil {
			return nil, err
		}
		// Every member serves the edit before the halt: the halt takes
		// back what the step gave.
		if _, err := t.members.wait(ctx, bound); err != nil {
			return nil, fmt.Errorf("halt %d: the members serving the edit before the gate's bound: %w", i+1, err)
		}
		haltAt, err := policy.wait(ctx, o.timeout+bound)
		if err != nil {
			return nil, fmt.Errorf("halt %d: the policy halting: %w", i+1, err)
		}
		// From the halt on, every view waits for the stable revision; a
		// cluster that is back already counts at once.
		t.reset(stable)
		r := haltResult{halted: haltAt.Sub(began)}
		for _, v := range []struct {
			name string
			t    *tracker
			d    *time.Duration
		}{{"copies written", t.written, &r.written}, {"members", t.members, &r.members}, {"hub status", t.hub, &r.hub}} {
			at, err := v.t.wait(ctx, o.timeout)
			if err != nil {
				return nil, fmt.Errorf("halt %d, %s: %w", i+1, v.name, err)
			}
			*v.d = at.Sub(haltAt)
		}
		progress("halt %d: halted %s after the edit; every copy stable %s after the halt, served %s, hub says so %s", i+1,
			ms(r.halted), ms(r.written), ms(r.members), ms(r.hub))
		out = append(out, r)
	}
	return out, nil
}

// haltBound is gate Confirmed's bound in the halts: long enough that
// every member has the edit before the halt (twice the slowest edit
// measured, rounded up to the second), at least 2 s.
func haltBound(o options, r result) time.Duration {
	if o.haltFor > 0 {
		return o.haltFor
	}
	var slowest time.Duration
	for _, e := range r.edits {
		slowest = max(slowest, e.members)
	}
	return max(2*time.Second, (2*slowest).Truncate(time.Second)+time.Second)
}
