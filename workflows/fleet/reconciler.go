package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/flagplane/flagplane/api/fleet/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/workflows"
)

// Event reasons of the fleet hub, on the placement.
const (
	EventPlaced       = "Placed"
	EventCorrected    = "DriftCorrected"
	EventDrifted      = "Drifted"
	EventConflict     = "Conflict"
	EventRemoved      = "Removed"
	EventClusterLeft  = "ClusterLeft"
	EventWriteFailed  = "PlacementWriteFailed"
	actionPlace       = "Place"
	reasonTargetFound = "TargetFound"
)

// DefaultMemberTimeout is Reconciler.MemberTimeout's default.
const DefaultMemberTimeout = 10 * time.Second

// Members are the member clusters the hub is engaged with.
type Members interface {
	// Member is the member's client, which reads from the hub's cache of
	// the member and writes to its API server, and what the hub knows of
	// its reach. The client is nil when the hub is not engaged with it.
	Member(cluster string) (client.Client, Reach)
	// Engaged lists the members the hub has a client for.
	Engaged() []string
}

// Reconciler places FeatureFlags onto members and reports on them.
type Reconciler struct {
	// Hub reads the hub's objects (from its cache) and writes placements'
	// status.
	Hub client.Client
	// Members are the member clusters.
	Members Members
	// InventoryNamespace holds the ClusterProfiles and FleetGrants.
	InventoryNamespace string
	// Events, when set, receives the placement's Events.
	Events events.EventRecorder
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// MemberTimeout bounds what one reconcile waits for one member
	// (DefaultMemberTimeout when zero): a member whose API server stalls
	// holds one slot of one reconcile that long, never the hub's workers.
	MemberTimeout time.Duration

	specs specs
}

// Reconcile brings every selected member's copy of the placement's target
// to the revision planned for it (the hub's, or, under a fleet rollout,
// the stable one until the cluster's step starts), deletes the copies of
// clusters it no longer selects, and writes the placement's status (and
// the rollout policy's). It returns how soon to look again (0: when
// something changes).
func (r *Reconciler) Reconcile(ctx context.Context, key types.NamespacedName) (time.Duration, error) {
	var p fleetv1alpha1.FeatureFlagPlacement
	if err := r.Hub.Get(ctx, key, &p); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, r.removeCopies(ctx, key, nil, nil)
		}
		return 0, err
	}
	var hub v1beta1.FeatureFlag
	err := r.Hub.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Spec.TargetRef.Name}, &hub)
	if apierrors.IsNotFound(err) {
		return 0, r.writeStatus(ctx, &p, notAccepted(&p, "TargetNotFound",
			fmt.Sprintf("FeatureFlag %s/%s does not exist on the hub; member copies are left as they are",
				p.Namespace, p.Spec.TargetRef.Name)))
	}
	if err != nil {
		return 0, err
	}
	selected, inventory, err := r.selected(ctx, &p)
	if err != nil {
		return 0, r.writeStatus(ctx, &p, notAccepted(&p, "InvalidSelector", err.Error()))
	}
	hubRev := Revision(&hub)
	// Remembered: should a rollout of a later edit halt, this spec is the
	// stable one, and every copy may hold the later one by then.
	r.specs.put(specKey(&hub), hubRev, hub.Spec.FlagSpec)
	ro, err := r.rollout(ctx, &p, hubRev)
	if err != nil {
		return 0, err
	}
	status := fleetv1alpha1.FeatureFlagPlacementStatus{ObservedGeneration: p.Generation, Revision: hubRev}
	keep := map[string]bool{}
	for _, s := range selected {
		if s.Granted {
			keep[s.Cluster] = true
		}
	}
	status.Clusters = r.placeAll(ctx, &p, &hub, selected, func(s Selected) string { return ro.planned(s, hubRev) })
	for _, cluster := range r.Members.Engaged() {
		if !inventory[cluster] {
			keep[cluster] = true // left the inventory: what it has stays there
		}
	}
	if err := r.removeCopies(ctx, key, keep, &p); err != nil {
		log.FromContext(ctx).Info("removing copies of deselected clusters", "error", err.Error())
	}
	r.reportLeft(&p, selected, inventory)
	summarise(&status, p.Generation)
	again, err := r.advance(ctx, ro, selected, status.Clusters)
	if err != nil {
		return 0, err
	}
	return again, r.writeStatus(ctx, &p, status)
}

// selected lists the placement's clusters among the inventory's profiles,
// and the names of every profile of the inventory.
func (r *Reconciler) selected(ctx context.Context, p *fleetv1alpha1.FeatureFlagPlacement) ([]Selected, map[string]bool, error) {
	var profiles cpv1alpha1.ClusterProfileList
	if err := r.Hub.List(ctx, &profiles, client.InNamespace(r.InventoryNamespace)); err != nil {
		return nil, nil, err
	}
	var grants fleetv1alpha1.FleetGrantList
	if err := r.Hub.List(ctx, &grants, client.InNamespace(r.InventoryNamespace)); err != nil {
		return nil, nil, err
	}
	inventory := map[string]bool{}
	for _, cp := range profiles.Items {
		inventory[cp.Name] = true
	}
	sel, err := Select(p, profiles.Items, grants.Items)
	return sel, inventory, err
}

// placeConcurrency is how many clusters one reconcile places at once: a
// write is a round trip to its member, and a fleet's members are many.
const placeConcurrency = 32

// placeAll places every selected cluster, placeConcurrency at a time, and
// returns their statuses in the order of selected.
func (r *Reconciler) placeAll(ctx context.Context, p *fleetv1alpha1.FeatureFlagPlacement, hub *v1beta1.FeatureFlag,
	selected []Selected, planned func(Selected) string) []fleetv1alpha1.ClusterPlacementStatus {
	if len(selected) == 0 {
		return nil
	}
	out := make([]fleetv1alpha1.ClusterPlacementStatus, len(selected))
	slots := make(chan struct{}, placeConcurrency)
	var wg sync.WaitGroup
	for i, s := range selected {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			out[i] = r.place(ctx, p, hub, planned(s), s)
		})
	}
	wg.Wait()
	return out
}

// place brings one cluster's copy to its planned revision, as far as the
// drift policy allows, and observes it.
func (r *Reconciler) place(ctx context.Context, p *fleetv1alpha1.FeatureFlagPlacement, hub *v1beta1.FeatureFlag,
	planned string, s Selected) fleetv1alpha1.ClusterPlacementStatus {
	ctx, cancel := r.memberContext(ctx)
	defer cancel()
	o := Observation{Selected: s, Planned: planned, Namespace: p.Namespace, Placement: p.Name,
		Drift: p.Spec.Drift, Now: r.now()}
	if !s.Granted {
		return Observe(o)
	}
	c, reach := r.Members.Member(s.Cluster)
	o.Reach = reach
	if c == nil {
		return Observe(o)
	}
	copyOf, err := r.memberCopy(ctx, c, hub)
	if err != nil {
		o.Reach.Reachable, o.Reach.Err = false, err.Error()
		return Observe(o)
	}
	o.Copy = copyOf
	if !reach.Reachable {
		return Observe(o)
	}
	want, err := r.specOf(ctx, hub, planned)
	if err == nil {
		o.Wrote, err = r.write(ctx, c, p, want, planned, copyOf, s.Cluster)
	}
	st := Observe(o)
	if err != nil {
		st.Message = fmt.Sprintf("writing the copy: %v", err)
	}
	return st
}

func (r *Reconciler) memberCopy(ctx context.Context, c client.Client, hub *v1beta1.FeatureFlag) (*v1beta1.FeatureFlag, error) {
	var ff v1beta1.FeatureFlag
	err := c.Get(ctx, client.ObjectKeyFromObject(hub), &ff)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &ff, nil
}

// write creates the copy, or corrects it under drift Correct, and says
// whether it wrote.
func (r *Reconciler) write(ctx context.Context, c client.Client, p *fleetv1alpha1.FeatureFlagPlacement,
	want *v1beta1.FeatureFlag, wantRev string, current *v1beta1.FeatureFlag, cluster string) (bool, error) {
	switch {
	case current == nil:
		if err := c.Create(ctx, Copy(want, p.Name), client.FieldOwner(fleetv1alpha1.FieldManager)); err != nil {
			workflows.Warn(r.Events, p, EventWriteFailed, actionPlace, "creating the copy in cluster %s: %v", cluster, err)
			return false, err
		}
		workflows.Normal(r.Events, p, EventPlaced, actionPlace, "placed revision %s in cluster %s", short(wantRev), cluster)
		return true, nil
	case !Placed(current, p.Name):
		return false, nil
	case Revision(current) == wantRev:
		return false, nil
	case p.Spec.Drift == fleetv1alpha1.DriftReport && Edited(current):
		return false, nil
	}
	updated := current.DeepCopy()
	updated.Spec = *want.Spec.DeepCopy()
	updated.Labels = with(current.Labels, fleetv1alpha1.PlacementLabel, p.Name)
	updated.Annotations = with(current.Annotations, fleetv1alpha1.PlacedRevisionAnnotation, wantRev)
	if err := c.Update(ctx, updated, client.FieldOwner(fleetv1alpha1.FieldManager)); err != nil {
		workflows.Warn(r.Events, p, EventWriteFailed, actionPlace, "updating the copy in cluster %s: %v", cluster, err)
		return false, err
	}
	workflows.Normal(r.Events, p, EventCorrected, actionPlace, "wrote revision %s in cluster %s (it held %s)",
		short(wantRev), cluster, short(Revision(current)))
	return true, nil
}

// removeCopies deletes the copies that the placement key wrote in the
// engaged members not in keep: the clusters of the inventory that the
// placement no longer selects, or no longer may place into. A cluster that
// left the inventory keeps its copies: the hub lets go of it. With p nil
// (the placement is gone) every engaged member's copy goes.
func (r *Reconciler) removeCopies(ctx context.Context, key types.NamespacedName, keep map[string]bool,
	p *fleetv1alpha1.FeatureFlagPlacement) error {
	var errs []error
	for _, cluster := range r.Members.Engaged() {
		if keep[cluster] {
			continue
		}
		c, reach := r.Members.Member(cluster)
		if c == nil || !reach.Reachable {
			continue
		}
		if err := r.removeCopiesIn(ctx, c, key, p, cluster); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeCopiesIn deletes the copies of placement key in one member, within
// MemberTimeout.
func (r *Reconciler) removeCopiesIn(ctx context.Context, c client.Client, key types.NamespacedName,
	p *fleetv1alpha1.FeatureFlagPlacement, cluster string) error {
	ctx, cancel := r.memberContext(ctx)
	defer cancel()
	var list v1beta1.FeatureFlagList
	if err := c.List(ctx, &list, client.InNamespace(key.Namespace),
		client.MatchingLabels{fleetv1alpha1.PlacementLabel: key.Name}); err != nil {
		return nil // the namespace is no longer granted there: the hub cannot read it
	}
	var errs []error
	for i := range list.Items {
		ff := &list.Items[i]
		if err := c.Delete(ctx, ff); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("cluster %s: %w", cluster, err))
			continue
		}
		if p != nil {
			workflows.Normal(r.Events, p, EventRemoved, actionPlace,
				"deleted the copy %s/%s from cluster %s, which the placement no longer selects", ff.Namespace, ff.Name, cluster)
		}
	}
	return errors.Join(errs...)
}

// reportLeft sends an Event for each cluster of the last status that the
// placement lets go of while its copy stays there: one that left the
// inventory (the hub never deletes there), or one deselected while the hub
// cannot reach it.
func (r *Reconciler) reportLeft(p *fleetv1alpha1.FeatureFlagPlacement, selected []Selected, inventory map[string]bool) {
	engaged := r.Members.Engaged()
	for _, was := range p.Status.Clusters {
		if was.State == fleetv1alpha1.ClusterNotGranted ||
			slices.ContainsFunc(selected, func(s Selected) bool { return s.Cluster == was.Cluster }) {
			continue
		}
		switch {
		case !inventory[was.Cluster]:
			workflows.Warn(r.Events, p, EventClusterLeft, actionPlace,
				"cluster %s left the inventory: the hub lets go of it, and its copy of %s stays there, serving revision %s",
				was.Cluster, p.Spec.TargetRef.Name, short(was.Revision))
		case !slices.Contains(engaged, was.Cluster):
			workflows.Warn(r.Events, p, EventClusterLeft, actionPlace,
				"cluster %s is no longer selected, and the hub cannot reach it: its copy of %s stays there, serving revision %s",
				was.Cluster, p.Spec.TargetRef.Name, short(was.Revision))
		}
	}
}

// summarise orders the clusters (not Current first) and sets the counts
// and conditions.
func summarise(st *fleetv1alpha1.FeatureFlagPlacementStatus, generation int64) {
	slices.SortStableFunc(st.Clusters, func(a, b fleetv1alpha1.ClusterPlacementStatus) int {
		ac, bc := a.State == fleetv1alpha1.ClusterCurrent, b.State == fleetv1alpha1.ClusterCurrent
		if ac != bc {
			if bc {
				return -1
			}
			return 1
		}
		if a.Cluster < b.Cluster {
			return -1
		}
		if a.Cluster > b.Cluster {
			return 1
		}
		return 0
	})
	current, granted := 0, 0
	var waiting []string
	for _, c := range st.Clusters {
		if c.State == fleetv1alpha1.ClusterNotGranted {
			continue
		}
		granted++
		if c.State == fleetv1alpha1.ClusterCurrent {
			current++
		} else {
			waiting = append(waiting, fmt.Sprintf("%s (%s)", c.Cluster, c.State))
		}
	}
	st.Current = fmt.Sprintf("%d/%d", current, granted)
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1beta1.ConditionAccepted,
		Status: metav1.ConditionTrue, Reason: reasonTargetFound, ObservedGeneration: generation,
		Message: "the target FeatureFlag exists on the hub"})
	ready := metav1.Condition{Type: v1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: "AllCurrent",
		ObservedGeneration: generation, Message: fmt.Sprintf("%d of %d granted clusters serve the revision", current, granted)}
	if len(waiting) > 0 {
		ready.Status, ready.Reason = metav1.ConditionFalse, "NotAllCurrent"
		ready.Message = "waiting for " + joinShort(waiting, 8)
	}
	meta.SetStatusCondition(&st.Conditions, ready)
}

func notAccepted(p *fleetv1alpha1.FeatureFlagPlacement, reason, msg string) fleetv1alpha1.FeatureFlagPlacementStatus {
	st := fleetv1alpha1.FeatureFlagPlacementStatus{ObservedGeneration: p.Generation, Clusters: p.Status.Clusters}
	for _, t := range []string{v1beta1.ConditionAccepted, v1beta1.ConditionReady} {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionFalse,
			Reason: reason, Message: msg, ObservedGeneration: p.Generation})
	}
	return st
}

// writeStatus writes st when it differs from what the placement has, the
// conditions' transition times kept where their status did not change.
func (r *Reconciler) writeStatus(ctx context.Context, p *fleetv1alpha1.FeatureFlagPlacement,
	st fleetv1alpha1.FeatureFlagPlacementStatus) error {
	keepTransitions(st.Conditions, p.Status.Conditions)
	keepHeard(&st, &p.Status)
	if equality.Semantic.DeepEqual(p.Status, st) {
		return nil
	}
	updated := p.DeepCopy()
	updated.Status = st
	return r.Hub.Status().Update(ctx, updated)
}

// keepTransitions keeps the old transition times of conditions whose
// status did not change.
func keepTransitions(conditions, old []metav1.Condition) {
	for i := range conditions {
		if was := meta.FindStatusCondition(old, conditions[i].Type); was != nil && was.Status == conditions[i].Status {
			conditions[i].LastTransitionTime = was.LastTransitionTime
		}
	}
}

// keepHeard keeps the last status's LastHeard of a cluster whose state is
// the same and whose member the hub heard from within the last minute, so
// that a quiet fleet does not write a status for every probe.
func keepHeard(st, old *fleetv1alpha1.FeatureFlagPlacementStatus) {
	for i := range st.Clusters {
		c := &st.Clusters[i]
		for _, o := range old.Clusters {
			if o.Cluster != c.Cluster || o.State != c.State || o.LastHeard == nil || c.LastHeard == nil {
				continue
			}
			if c.State != fleetv1alpha1.ClusterUnknown && c.LastHeard.Sub(o.LastHeard.Time) < time.Minute {
				c.LastHeard = o.LastHeard
			}
		}
	}
}

// memberContext bounds the work of one reconcile with one member.
func (r *Reconciler) memberContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := r.MemberTimeout
	if d <= 0 {
		d = DefaultMemberTimeout
	}
	return context.WithTimeout(ctx, d)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func joinShort(items []string, n int) string {
	out := ""
	for i, s := range items {
		if i == n {
			return out + fmt.Sprintf(" and %d more", len(items)-n)
		}
		if i > 0 {
			out += ", "
		}
		out += s
	}
	return out
}
