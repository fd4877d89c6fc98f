package fleet

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	fleetv1alpha1 "github.com/flagplane/flagplane/api/fleet/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/workflows"
)

// EventRollout is the reason of a fleet rollout's Events, on its policy.
const EventRollout = "FleetRollout"

// rollout is a placement's fleet rollout in this reconcile: nil when no
// policy of cluster steps stages its FeatureFlag.
type rollout struct {
	policy *deliveryv1alpha1.FeatureFlagRolloutPolicy
	status deliveryv1alpha1.FeatureFlagRolloutPolicyStatus
}

// rollout finds the policy that stages the placement's FeatureFlag across
// clusters (the oldest one with cluster steps, as in one cluster) and
// begins its status from the hub's revision.
func (r *Reconciler) rollout(ctx context.Context, p *fleetv1alpha1.FeatureFlagPlacement, hubRev string) (*rollout, error) {
	var list deliveryv1alpha1.FeatureFlagRolloutPolicyList
	if err := r.Hub.List(ctx, &list, client.InNamespace(p.Namespace)); err != nil {
		return nil, err
	}
	var found *deliveryv1alpha1.FeatureFlagRolloutPolicy
	for i := range list.Items {
		pol := &list.Items[i]
		if pol.Spec.TargetRef.Name != p.Spec.TargetRef.Name || !ClusterSteps(pol) || pol.DeletionTimestamp != nil {
			continue
		}
		if found == nil || pol.CreationTimestamp.Before(&found.CreationTimestamp) ||
			(pol.CreationTimestamp.Equal(&found.CreationTimestamp) && pol.Name < found.Name) {
			found = pol
		}
	}
	if found == nil {
		return nil, nil
	}
	return &rollout{policy: found, status: Begin(found, hubRev, r.now())}, nil
}

// planned is the revision a cluster is to hold.
func (ro *rollout) planned(s Selected, hubRev string) string {
	if ro == nil {
		return hubRev
	}
	return Planned(&ro.status, StepOf(ro.policy.Spec.Steps, s.Labels))
}

// advance moves the rollout on from what the clusters confirm and writes
// the policy's status; it returns how soon to look again.
func (r *Reconciler) advance(ctx context.Context, ro *rollout, selected []Selected,
	clusters []fleetv1alpha1.ClusterPlacementStatus) (time.Duration, error) {
	if ro == nil {
		return 0, nil
	}
	steps := ro.policy.Spec.Steps
	var rcs []RolloutCluster
	byStep := make([][]deliveryv1alpha1.ClusterRevision, len(steps)+1)
	for _, s := range selected {
		if !s.Granted {
			continue
		}
		i := slices.IndexFunc(clusters, func(c fleetv1alpha1.ClusterPlacementStatus) bool { return c.Cluster == s.Cluster })
		step := StepOf(steps, s.Labels)
		rcs = append(rcs, RolloutCluster{Cluster: s.Cluster, Step: step, Status: clusters[i]})
		serving := ""
		if clusters[i].State == fleetv1alpha1.ClusterCurrent {
			serving = clusters[i].Revision
		}
		byStep[step] = append(byStep[step], deliveryv1alpha1.ClusterRevision{Cluster: s.Cluster,
			Planned: clusters[i].Planned, Serving: serving})
	}
	st := &ro.status
	before := st.Phase
	startedStep := st.Step
	again, notes := Advance(ro.policy, st, rcs, r.now())
	st.Steps = stepStatuses(steps, byStep)
	setRolloutConditions(st, ro.policy.Generation)
	for _, n := range notes {
		if st.Phase == deliveryv1alpha1.PhaseHalted {
			workflows.Warn(r.Events, ro.policy, EventRollout, workflows.ActionRollout, "%s", n)
		} else {
			workflows.Normal(r.Events, ro.policy, EventRollout, workflows.ActionRollout, "%s", n)
		}
	}
	if st.Step != startedStep || st.Phase != before {
		again = time.Millisecond // the plan changed: write the clusters it moved
	}
	if err := r.writePolicyStatus(ctx, ro); err != nil {
		return 0, err
	}
	return again, nil
}

func stepStatuses(steps []deliveryv1alpha1.RolloutStep, byStep [][]deliveryv1alpha1.ClusterRevision) []deliveryv1alpha1.StepStatus {
	out := make([]deliveryv1alpha1.StepStatus, 0, len(byStep))
	for i, cs := range byStep {
		name := "rest"
		if i < len(steps) {
			name = steps[i].Name
			if name == "" {
				name = fmt.Sprintf("step-%d", i)
			}
		} else if len(cs) == 0 {
			continue
		}
		st := deliveryv1alpha1.StepStatus{Name: name, Clusters: cs}
		if len(cs) > 64 {
			st.Clusters, st.More = cs[:64], int32(len(cs)-64)
		}
		out = append(out, st)
	}
	return out
}

func (r *Reconciler) writePolicyStatus(ctx context.Context, ro *rollout) error {
	keepTransitions(ro.status.Conditions, ro.policy.Status.Conditions)
	if equality.Semantic.DeepEqual(ro.policy.Status, ro.status) {
		return nil
	}
	updated := ro.policy.DeepCopy()
	updated.Status = ro.status
	return r.Hub.Status().Update(ctx, updated)
}

// specs remembers the specs of revisions, by FeatureFlag and revision:
// every spec the hub places (Reconcile puts the hub's own each time) and
// those found in members. A halt writes the stable spec to clusters that
// no longer hold it, once the hub's FeatureFlag holds the halted one.
//
// It keeps the specsPerFlagSet revisions of each FeatureFlag used last: a
// rollout's stable spec is used at every reconcile while a cluster waits
// for its step, so edits made meanwhile do not push it out.
type specs struct {
	mu sync.Mutex
	m  map[string][]revisionSpec
}

type revisionSpec struct {
	rev  string
	spec v1beta1.FlagSpec
}

const (
	specsPerFlagSet = 4
	// specsFlagSets bounds the FeatureFlags remembered (those of deleted
	// placements stay until then): past it, it starts afresh.
	specsFlagSets = 10000
)

// get is the spec of revision rev of FeatureFlag ff, now the one used last.
func (s *specs) get(ff, rev string) (v1beta1.FlagSpec, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.m[ff]
	for i, e := range list {
		if e.rev == rev {
			copy(list[1:i+1], list[:i])
			list[0] = e
			return e.spec, true
		}
	}
	return v1beta1.FlagSpec{}, false
}

// put remembers spec as revision rev of FeatureFlag ff, used last.
func (s *specs) put(ff, rev string, spec v1beta1.FlagSpec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) > specsFlagSets {
		s.m = map[string][]revisionSpec{}
	}
	list := slices.DeleteFunc(s.m[ff], func(e revisionSpec) bool { return e.rev == rev })
	list = append([]revisionSpec{{rev: rev, spec: spec}}, list...)
	s.m[ff] = list[:min(len(list), specsPerFlagSet)]
}

// specKey is the key of hub's FeatureFlag in specs.
func specKey(hub *v1beta1.FeatureFlag) string { return hub.Namespace + "/" + hub.Name }

// specOf is the FeatureFlag as of revision rev: the hub's own when it is
// that revision; else one the hub placed since it started; else the spec a
// member holds of it, in its copy or in its history (the
// FeatureFlagRevisions that member's flagplane records of every spec it
// accepted).
func (r *Reconciler) specOf(ctx context.Context, hub *v1beta1.FeatureFlag, rev string) (*v1beta1.FeatureFlag, error) {
	if Revision(hub) == rev {
		return hub, nil
	}
	key := specKey(hub)
	as := func(spec v1beta1.FlagSpec) *v1beta1.FeatureFlag {
		ff := hub.DeepCopy()
		ff.Spec.FlagSpec = spec
		return ff
	}
	if spec, ok := r.specs.get(key, rev); ok {
		return as(spec), nil
	}
	for _, cluster := range r.Members.Engaged() {
		c, reach := r.Members.Member(cluster)
		if c == nil || !reach.Reachable {
			continue
		}
		mctx, cancel := r.memberContext(ctx)
		spec, ok := memberSpec(mctx, c, hub, rev)
		cancel()
		if ok {
			r.specs.put(key, rev, spec)
			return as(spec), nil
		}
	}
	return nil, fmt.Errorf("the spec of revision %s is in no reachable member's copy or history", short(rev))
}

// memberSpec looks for revision rev of hub's FeatureFlag in one member.
func memberSpec(ctx context.Context, c client.Client, hub *v1beta1.FeatureFlag, rev string) (v1beta1.FlagSpec, bool) {
	var ff v1beta1.FeatureFlag
	if err := c.Get(ctx, client.ObjectKeyFromObject(hub), &ff); err == nil && Revision(&ff) == rev {
		return ff.Spec.FlagSpec, true
	}
	var revs deliveryv1alpha1.FeatureFlagRevisionList
	if err := c.List(ctx, &revs, client.InNamespace(hub.Namespace),
		client.MatchingLabels{deliveryv1alpha1.FlagSetLabel: hub.Name}); err != nil {
		return v1beta1.FlagSpec{}, false
	}
	for _, fr := range revs.Items {
		candidate := hub.DeepCopy()
		candidate.Spec.FlagSpec = fr.Spec.FlagSpec
		if Revision(candidate) == rev {
			return fr.Spec.FlagSpec, true
		}
	}
	return v1beta1.FlagSpec{}, false
}
