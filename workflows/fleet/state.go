package fleet

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/flagplane/flagplane/api/fleet/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
)

// Reach is what the hub knows of its connection to a member.
type Reach struct {
	// Engaged: the hub has a client and a synced cache for the member.
	Engaged bool
	// Reachable: the member's API server answered the hub's last probe.
	Reachable bool
	// LastHeard is when it last answered; zero if it never did.
	LastHeard time.Time
	// Err is why the member is not engaged or not reachable.
	Err string
}

// Observation is what the hub sees of one selected cluster.
type Observation struct {
	Selected
	Reach Reach
	// Copy is the member's FeatureFlag of the placement's target, nil when
	// it has none.
	Copy *v1beta1.FeatureFlag
	// Planned is the revision planned for the cluster: the hub's
	// FeatureFlag's, or under a fleet rollout the stable one until the
	// cluster's step starts.
	Planned string
	// Namespace is the placement's namespace.
	Namespace string
	// Placement is the placement's name.
	Placement string
	// Drift is the placement's drift policy.
	Drift fleetv1alpha1.DriftPolicy
	// Wrote: the hub wrote the copy in this pass.
	Wrote bool
	// Now is the time the status is written at.
	Now time.Time
}

// Observe is what a placement's status says of one cluster. Only what the
// member's flagplane wrote on the copy counts as confirmed: a cluster the
// hub cannot hear from is Unknown, whatever it served before.
func Observe(o Observation) fleetv1alpha1.ClusterPlacementStatus {
	st := fleetv1alpha1.ClusterPlacementStatus{Cluster: o.Cluster}
	if !o.LastHeard().IsZero() {
		t := metav1.NewTime(o.LastHeard())
		st.LastHeard = &t
	}
	if !o.Granted {
		st.State = fleetv1alpha1.ClusterNotGranted
		st.Message = fmt.Sprintf("no FleetGrant grants namespace %q this cluster", o.Namespace)
		return st
	}
	st.Planned = o.Planned
	if o.Copy != nil {
		st.Revision = o.Copy.Status.Revision
		st.Delivered = o.Copy.Status.Delivered
		st.Confirmed = o.Copy.Status.Confirmed
	}
	if !o.Reach.Engaged || !o.Reach.Reachable {
		st.State = fleetv1alpha1.ClusterUnknown
		st.Message = unheard(o)
		return st
	}
	switch {
	case o.Copy == nil:
		st.State = fleetv1alpha1.ClusterBehind
		st.Message = "the copy is not in the member yet"
	case !Placed(o.Copy, o.Placement):
		st.State = fleetv1alpha1.ClusterConflict
		st.Message = fmt.Sprintf("the member has a FeatureFlag %s/%s that this placement did not write; the hub leaves it",
			o.Copy.Namespace, o.Copy.Name)
	case !o.Wrote && Edited(o.Copy):
		st.State = fleetv1alpha1.ClusterDrifted
		st.Message = fmt.Sprintf("the member's copy was edited there: it holds revision %s, the planned one is %s",
			short(Revision(o.Copy)), short(o.Planned))
		if o.Drift == fleetv1alpha1.DriftReport {
			st.Message += "; drift: Report leaves it"
		}
	default:
		st.State, st.Message = served(o)
	}
	return st
}

// LastHeard is when the member last answered, or zero.
func (o Observation) LastHeard() time.Time { return o.Reach.LastHeard }

// served says whether the member's flagplane confirms the hub's revision.
func served(o Observation) (fleetv1alpha1.ClusterState, string) {
	c := o.Copy
	if o.Wrote || c.Status.ObservedGeneration != c.Generation {
		return fleetv1alpha1.ClusterBehind, "the member's flagplane has not seen the copy's newest spec yet"
	}
	if c.Status.Revision != o.Planned {
		return fleetv1alpha1.ClusterBehind, fmt.Sprintf("the member serves revision %s, not %s yet",
			short(c.Status.Revision), short(o.Planned))
	}
	ready := meta.FindStatusCondition(c.Status.Conditions, v1beta1.ConditionReady)
	if ready == nil {
		return fleetv1alpha1.ClusterBehind, "the member's copy has no Ready condition yet"
	}
	if ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != c.Generation {
		return fleetv1alpha1.ClusterBehind, fmt.Sprintf("the member's copy is not Ready (%s): %s", ready.Reason, ready.Message)
	}
	return fleetv1alpha1.ClusterCurrent, ""
}

func unheard(o Observation) string {
	why := o.Reach.Err
	if why == "" {
		why = "not connected yet"
	}
	if o.LastHeard().IsZero() {
		return "the hub has never heard from the member's API server: " + why
	}
	age := o.Now.Sub(o.LastHeard()).Round(time.Second)
	return fmt.Sprintf("no word from the member's API server for %s: %s; it keeps serving what it has", age, why)
}

// short is a revision as the CLI shows it, 12 digits.
func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	if rev == "" {
		return "(none)"
	}
	return rev
}
