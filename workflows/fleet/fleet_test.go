package fleet

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/flagplane/flagplane/api"
	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	fleetv1alpha1 "github.com/flagplane/flagplane/api/fleet/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
)

func profile(name string, labels map[string]string) cpv1alpha1.ClusterProfile {
	return cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func grantOf(namespaces []string, sel map[string]string) fleetv1alpha1.FleetGrant {
	return fleetv1alpha1.FleetGrant{Spec: fleetv1alpha1.FleetGrantSpec{Namespaces: namespaces,
		ClusterSelector: metav1.LabelSelector{MatchLabels: sel}}}
}

func TestSelectPicksByLabelsAndGrants(t *testing.T) {
	profiles := []cpv1alpha1.ClusterProfile{
		profile("prod-eu", map[string]string{"env": "prod"}),
		profile("dev", map[string]string{"env": "dev"}),
		profile("prod-us", map[string]string{"env": "prod", "region": "us"}),
	}
	grants := []fleetv1alpha1.FleetGrant{
		grantOf([]string{"team-a"}, map[string]string{"region": "us"}),
		grantOf([]string{"team-a", "team-b"}, map[string]string{"env": "dev"}),
	}
	p := &fleetv1alpha1.FeatureFlagPlacement{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"},
		Spec: fleetv1alpha1.FeatureFlagPlacementSpec{ClusterSelector: metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpExists}}}}}
	got, err := Select(p, profiles, grants)
	if err != nil {
		t.Fatal(err)
	}
	want := []Selected{{Cluster: "dev", Granted: true}, {Cluster: "prod-eu"}, {Cluster: "prod-us", Granted: true}}
	if len(got) != len(want) {
		t.Fatalf("Select = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Cluster != want[i].Cluster || got[i].Granted != want[i].Granted {
			t.Errorf("Select[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	if got[2].Labels["region"] != "us" {
		t.Errorf("Select keeps no labels of prod-us: %v", got[2].Labels)
	}
	p.Namespace = "team-c"
	got, _ = Select(p, profiles, grants)
	for _, s := range got {
		if s.Granted {
			t.Errorf("team-c has no grant, but %s is granted", s.Cluster)
		}
	}
	p.Spec.ClusterSelector.MatchExpressions[0].Operator = "Nonsense"
	if _, err := Select(p, profiles, grants); err == nil || !strings.Contains(err.Error(), "clusterSelector") {
		t.Errorf("a bad selector: err = %v, want one naming spec.clusterSelector", err)
	}
}

func TestGrantedNamespaces(t *testing.T) {
	grants := []fleetv1alpha1.FleetGrant{
		grantOf([]string{"team-b", "team-a"}, map[string]string{"env": "dev"}),
		grantOf([]string{"team-a"}, nil), // every cluster
		grantOf([]string{"team-x"}, map[string]string{"env": "prod"}),
	}
	got := GrantedNamespaces(map[string]string{"env": "dev"}, grants)
	if strings.Join(got, ",") != "team-a,team-b" {
		t.Errorf("GrantedNamespaces(dev) = %v, want [team-a team-b]", got)
	}
}

func flagSet(variant string) *v1beta1.FeatureFlag {
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "checkout", Generation: 3}}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
		"f": {State: "ENABLED", Variants: []byte(`{"on":true,"off":false}`), DefaultVariant: variant}}
	return ff
}

// memberCopy is a copy of hub placed by placement, as the member's
// flagplane reports it when it serves revision and is ready.
func memberCopy(hub *v1beta1.FeatureFlag, placement, revision string, ready bool) *v1beta1.FeatureFlag {
	c := Copy(hub, placement)
	c.Generation = 3
	c.Status.ObservedGeneration = 3
	c.Status.Revision = revision
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	c.Status.Conditions = []metav1.Condition{{Type: v1beta1.ConditionReady, Status: status, ObservedGeneration: 3, Reason: "R"}}
	return c
}

func TestObserve(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	hub := flagSet("on")
	rev := Revision(hub)
	other := Revision(flagSet("off"))
	if rev == "" || rev == other {
		t.Fatalf("revisions %q and %q", rev, other)
	}
	reach := Reach{Engaged: true, Reachable: true, LastHeard: now.Add(-time.Second)}
	base := Observation{Selected: Selected{Cluster: "dev", Granted: true}, Reach: reach, Planned: rev,
		Namespace: "team-a", Placement: "p", Drift: fleetv1alpha1.DriftCorrect, Now: now}
	edited := memberCopy(hub, "p", rev, true)
	edited.Spec = flagSet("off").Spec
	foreign := memberCopy(hub, "p", rev, true)
	foreign.Labels = nil
	cases := []struct {
		name    string
		change  func(*Observation)
		want    fleetv1alpha1.ClusterState
		message string
	}{
		{"current", func(o *Observation) { o.Copy = memberCopy(hub, "p", rev, true) }, fleetv1alpha1.ClusterCurrent, ""},
		{"not ready", func(o *Observation) { o.Copy = memberCopy(hub, "p", rev, false) }, fleetv1alpha1.ClusterBehind, "not Ready"},
		{"old revision served", func(o *Observation) { o.Copy = memberCopy(hub, "p", other, true) }, fleetv1alpha1.ClusterBehind, "not " + rev[:12]},
		{"just written", func(o *Observation) { o.Copy, o.Wrote = memberCopy(hub, "p", rev, true), true }, fleetv1alpha1.ClusterBehind, "not seen"},
		{"no copy", func(o *Observation) {}, fleetv1alpha1.ClusterBehind, "not in the member"},
		{"not granted", func(o *Observation) { o.Granted = false }, fleetv1alpha1.ClusterNotGranted, `"team-a"`},
		{"cut off", func(o *Observation) {
			o.Copy = memberCopy(hub, "p", rev, true)
			o.Reach.Reachable, o.Reach.Err = false, "connection refused"
			o.Reach.LastHeard = now.Add(-42 * time.Second)
		}, fleetv1alpha1.ClusterUnknown, "for 42s: connection refused"},
		{"never heard", func(o *Observation) { o.Reach = Reach{Err: "no token"} }, fleetv1alpha1.ClusterUnknown, "never heard"},
		{"drifted, reported", func(o *Observation) { o.Copy, o.Drift = edited, fleetv1alpha1.DriftReport }, fleetv1alpha1.ClusterDrifted, "Report leaves it"},
		{"not ours", func(o *Observation) { o.Copy = foreign }, fleetv1alpha1.ClusterConflict, "did not write"},
		{"stale, not edited", func(o *Observation) { o.Copy = memberCopy(flagSet("off"), "p", other, true) }, fleetv1alpha1.ClusterBehind, "serves revision"},
		{"edited, to be corrected", func(o *Observation) { o.Copy = edited }, fleetv1alpha1.ClusterDrifted, "edited there"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := base
			c.change(&o)
			got := Observe(o)
			if got.State != c.want || !strings.Contains(got.Message, c.message) {
				t.Errorf("Observe = %s %q, want %s with %q", got.State, got.Message, c.want, c.message)
			}
			if got.State == fleetv1alpha1.ClusterCurrent && got.Message != "" {
				t.Errorf("a Current cluster has message %q", got.Message)
			}
		})
	}
}

func TestRolloutStepByStep(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	pause := metav1.Duration{Duration: 10 * time.Second}
	p := &deliveryv1alpha1.FeatureFlagRolloutPolicy{Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
		Steps: []deliveryv1alpha1.RolloutStep{
			{Name: "dev", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}, Pause: &pause},
			{Name: "staging", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "staging"}}},
		},
		Gates: []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GateConfirmed, For: &metav1.Duration{Duration: time.Minute}}},
	}}
	if !ClusterSteps(p) {
		t.Fatal("ClusterSteps = false")
	}
	if got := StepOf(p.Spec.Steps, map[string]string{"env": "prod"}); got != 2 {
		t.Errorf("StepOf(prod) = %d, want 2 (the rest)", got)
	}
	p.Status = Begin(p, "r1", now)
	if p.Status.Phase != deliveryv1alpha1.PhaseCompleted || p.Status.StableRevision != "r1" {
		t.Fatalf("the first revision seen: %+v", p.Status)
	}
	st := Begin(p, "r2", now)
	if st.Phase != deliveryv1alpha1.PhaseProgressing || st.StableRevision != "r1" || st.TargetRevision != "r2" || st.Step != 0 {
		t.Fatalf("an edit: %+v", st)
	}
	if Planned(&st, 0) != "r2" || Planned(&st, 1) != "r1" || Planned(&st, 2) != "r1" {
		t.Errorf("planned: dev %s staging %s rest %s", Planned(&st, 0), Planned(&st, 1), Planned(&st, 2))
	}
	cluster := func(name string, step int, state fleetv1alpha1.ClusterState, rev string) RolloutCluster {
		return RolloutCluster{Cluster: name, Step: step, Status: fleetv1alpha1.ClusterPlacementStatus{State: state, Revision: rev}}
	}
	clusters := []RolloutCluster{cluster("dev", 0, fleetv1alpha1.ClusterBehind, "r1"), cluster("staging", 1, fleetv1alpha1.ClusterCurrent, "r1")}
	Advance(p, &st, clusters, now.Add(time.Second))
	if st.Step != 0 || st.StepServedAt != nil {
		t.Fatalf("dev does not serve r2 yet, but: %+v", st)
	}
	clusters[0] = cluster("dev", 0, fleetv1alpha1.ClusterCurrent, "r2")
	again, _ := Advance(p, &st, clusters, now.Add(2*time.Second))
	if st.Step != 0 || st.StepServedAt == nil || again <= 0 {
		t.Fatalf("dev serves r2: the pause runs, but: %+v, again %s", st, again)
	}
	Advance(p, &st, clusters, now.Add(13*time.Second))
	if st.Step != 1 || Planned(&st, 1) != "r2" {
		t.Fatalf("the pause is over: step 2 starts, but: %+v", st)
	}
	clusters[1] = cluster("staging", 1, fleetv1alpha1.ClusterUnknown, "r1")
	Advance(p, &st, clusters, now.Add(30*time.Second))
	if st.Phase != deliveryv1alpha1.PhaseProgressing {
		t.Fatalf("within the gate's bound, an Unknown cluster is waited for: %+v", st)
	}
	_, notes := Advance(p, &st, clusters, now.Add(80*time.Second))
	if st.Phase != deliveryv1alpha1.PhaseHalted || len(notes) != 1 || !strings.Contains(notes[0], "cluster staging did not confirm") {
		t.Fatalf("staging never confirmed: the gate halts, but: %+v %v", st, notes)
	}
	if Planned(&st, 0) != "r1" || Planned(&st, 1) != "r1" {
		t.Error("a halt plans the stable revision for every cluster")
	}
	p.Status = st
	if again := Begin(p, "r2", now.Add(90*time.Second)); again.Phase != deliveryv1alpha1.PhaseHalted {
		t.Errorf("the halted revision does not start again by itself: %+v", again)
	}
	if back := Begin(p, "r1", now.Add(90*time.Second)); back.Phase != deliveryv1alpha1.PhaseCompleted || back.TargetRevision != "r1" {
		t.Errorf("an edit back to the stable revision ends the rollout: %+v", back)
	}
	for i := 0; i < 2; i++ {
		clusters[i] = cluster(clusters[i].Cluster, i, fleetv1alpha1.ClusterCurrent, "r3")
	}
	p.Status = Begin(p, "r3", now.Add(100*time.Second))
	Advance(p, &p.Status, clusters, now.Add(101*time.Second))
	Advance(p, &p.Status, clusters, now.Add(112*time.Second))
	Advance(p, &p.Status, clusters, now.Add(113*time.Second))
	if p.Status.Phase != deliveryv1alpha1.PhaseCompleted || p.Status.StableRevision != "r3" || Planned(&p.Status, 2) != "r3" {
		t.Errorf("every step served: completed, r3 stable, the rest gets it: %+v", p.Status)
	}
}

type fakeMembers struct{ engaged []string }

func (f fakeMembers) Member(string) (client.Client, Reach) { return nil, Reach{} }
func (f fakeMembers) Engaged() []string                    { return f.engaged }

// A cluster that left the inventory is reported whether or not the hub has
// let go of it yet: the placement may see the profile gone first.
func TestReportLeft(t *testing.T) {
	p := &fleetv1alpha1.FeatureFlagPlacement{Status: fleetv1alpha1.FeatureFlagPlacementStatus{Clusters: []fleetv1alpha1.ClusterPlacementStatus{
		{Cluster: "dev", State: fleetv1alpha1.ClusterCurrent}, {Cluster: "prod", State: fleetv1alpha1.ClusterCurrent},
		{Cluster: "edge", State: fleetv1alpha1.ClusterUnknown}, {Cluster: "lab", State: fleetv1alpha1.ClusterNotGranted}}}}
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Members: fakeMembers{engaged: []string{"dev", "prod"}}, Events: rec}
	// dev left the inventory but is still engaged; prod is deselected and
	// reachable (its copy is deleted: no Event); edge is deselected and
	// unreachable; lab was never granted.
	r.reportLeft(p, nil, map[string]bool{"prod": true, "edge": true, "lab": true})
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	if len(got) != 2 || !strings.Contains(got[0], "cluster dev left the inventory") || !strings.Contains(got[1], "cluster edge is no longer selected") {
		t.Errorf("events = %q", got)
	}
}

// stalled is a member whose API server never answers: every call waits
// for its context.
type stalled struct{ client.Client }

func (stalled) Get(ctx context.Context, _ client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	<-ctx.Done()
	return ctx.Err()
}

func (stalled) List(ctx context.Context, _ client.ObjectList, _ ...client.ListOption) error {
	<-ctx.Done()
	return ctx.Err()
}

type stalledMembers struct{}

func (stalledMembers) Member(string) (client.Client, Reach) {
	return stalled{}, Reach{Engaged: true, Reachable: true, LastHeard: time.Now()}
}
func (stalledMembers) Engaged() []string { return []string{"stuck"} }

// A member that stops answering between two probes holds one reconcile for
// MemberTimeout, not for ever: the hub's workers serve the other
// placements, and the cluster shows as not reached.
func TestReconcileBoundsAStalledMember(t *testing.T) {
	scheme, err := api.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := cpv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	hub := flagSet("on")
	p := &fleetv1alpha1.FeatureFlagPlacement{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "p"},
		Spec: fleetv1alpha1.FeatureFlagPlacementSpec{TargetRef: fleetv1alpha1.FlagSetTargetReference{Name: hub.Name}}}
	grant := grantOf([]string{"team-a"}, nil)
	grant.Namespace, grant.Name = "fleet-system", "all"
	cp := profile("stuck", nil)
	cp.Namespace = "fleet-system"
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(hub, p, &grant, &cp).
		WithStatusSubresource(&fleetv1alpha1.FeatureFlagPlacement{}).Build()
	r := &Reconciler{Hub: c, Members: stalledMembers{}, InventoryNamespace: "fleet-system", MemberTimeout: 200 * time.Millisecond}
	done := make(chan error, 1)
	go func() {
		_, err := r.Reconcile(context.Background(), client.ObjectKeyFromObject(p))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stalled member held the reconcile")
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
		t.Fatal(err)
	}
	if len(p.Status.Clusters) != 1 || p.Status.Clusters[0].State != fleetv1alpha1.ClusterUnknown ||
		!strings.Contains(p.Status.Clusters[0].Message, "deadline exceeded") {
		t.Errorf("status of the stalled cluster: %+v", p.Status.Clusters)
	}
}

// oneMember is a hub engaged with one reachable member.
type oneMember struct {
	name string
	c    client.Client
}

func (m oneMember) Member(name string) (client.Client, Reach) {
	if name != m.name {
		return nil, Reach{}
	}
	return m.c, Reach{Engaged: true, Reachable: true, LastHeard: time.Now()}
}
func (m oneMember) Engaged() []string { return []string{m.name} }

// A halt gives every cluster the stable spec back even when no member
// holds it any more: by then every copy holds the halted edit, and a
// member may keep no history (its flagplane's FeatureFlagRevisions pruned,
// or none recorded). The hub remembers what it placed.
func TestHaltWritesTheStableSpecNoMemberHolds(t *testing.T) {
	scheme, err := api.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := cpv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stable := flagSet("off")
	stableRev := Revision(stable)
	p := &fleetv1alpha1.FeatureFlagPlacement{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "p"},
		Spec: fleetv1alpha1.FeatureFlagPlacementSpec{TargetRef: fleetv1alpha1.FlagSetTargetReference{Name: stable.Name}}}
	grant := grantOf([]string{"team-a"}, nil)
	grant.Namespace, grant.Name = "fleet-system", "all"
	cp := profile("dev", map[string]string{"env": "dev"})
	cp.Namespace = "fleet-system"
	policy := &deliveryv1alpha1.FeatureFlagRolloutPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "staged"},
		Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
			TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: "FeatureFlag", Name: stable.Name},
			Steps: []deliveryv1alpha1.RolloutStep{{Name: "dev",
				ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}}},
			Gates: []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GateConfirmed, For: &metav1.Duration{Duration: time.Minute}}}}}
	hubC := fake.NewClientBuilder().WithScheme(scheme).WithObjects(stable.DeepCopy(), p, &grant, &cp, policy).
		WithStatusSubresource(&fleetv1alpha1.FeatureFlagPlacement{}, &deliveryv1alpha1.FeatureFlagRolloutPolicy{}).Build()
	member := fake.NewClientBuilder().WithScheme(scheme).Build()
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	r := &Reconciler{Hub: hubC, Members: oneMember{name: "dev", c: member}, InventoryNamespace: "fleet-system",
		Now: func() time.Time { return now }}
	reconcile := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, client.ObjectKeyFromObject(p)); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
	}
	held := func() string {
		t.Helper()
		var c v1beta1.FeatureFlag
		if err := member.Get(ctx, client.ObjectKeyFromObject(stable), &c); err != nil {
			t.Fatalf("the member's copy: %v", err)
		}
		return Revision(&c)
	}

	reconcile()
	if got := held(); got != stableRev {
		t.Fatalf("placed revision %s, want %s", short(got), short(stableRev))
	}
	// The edit, which the member never confirms.
	var hub v1beta1.FeatureFlag
	if err := hubC.Get(ctx, client.ObjectKeyFromObject(stable), &hub); err != nil {
		t.Fatal(err)
	}
	f := hub.Spec.FlagSpec.Flags["f"]
	f.DefaultVariant = "on"
	hub.Spec.FlagSpec.Flags["f"] = f
	if err := hubC.Update(ctx, &hub); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if got := held(); got != Revision(&hub) {
		t.Fatalf("dev's step started, but the member holds %s, not the edit %s", short(got), short(Revision(&hub)))
	}
	now = now.Add(2 * time.Minute)
	reconcile() // the gate's bound has passed: halted
	if err := hubC.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
		t.Fatal(err)
	}
	if policy.Status.Phase != deliveryv1alpha1.PhaseHalted {
		t.Fatalf("phase %s, want Halted: %s", policy.Status.Phase, policy.Status.Message)
	}
	reconcile()
	if got := held(); got != stableRev {
		t.Errorf("after the halt the member holds %s, want the stable %s", short(got), short(stableRev))
	}
}

// A rollout's stable spec, used at every reconcile, outlives the edits
// made meanwhile; one no longer used goes once specsPerFlagSet newer are.
func TestSpecsKeepWhatIsUsed(t *testing.T) {
	var s specs
	spec := func(v string) v1beta1.FlagSpec { return flagSet(v).Spec.FlagSpec }
	s.put("team-a/checkout", "stable", spec("stable"))
	s.put("team-a/other", "old", spec("old"))
	for i := range 2 * specsPerFlagSet {
		s.put("team-a/checkout", fmt.Sprint("edit-", i), spec("edit"))
		s.put("team-a/other", fmt.Sprint("edit-", i), spec("edit"))
		if _, ok := s.get("team-a/checkout", "stable"); !ok {
			t.Fatalf("the stable spec in use went after %d edits", i+1)
		}
	}
	if got, ok := s.get("team-a/checkout", "stable"); !ok || got.Flags["f"].DefaultVariant != "stable" {
		t.Errorf("stable spec = %+v, %v", got, ok)
	}
	if _, ok := s.get("team-a/other", "old"); ok {
		t.Errorf("a spec no longer used is kept past %d newer ones", specsPerFlagSet)
	}
}
