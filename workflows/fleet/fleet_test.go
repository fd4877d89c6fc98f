package fleet

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

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
	want := []Selected{{"dev", true}, {"prod-eu", false}, {"prod-us", true}}
	if len(got) != len(want) {
		t.Fatalf("Select = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Select[%d] = %v, want %v", i, got[i], want[i])
		}
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
	base := Observation{Selected: Selected{"dev", true}, Reach: reach, HubRevision: rev,
		Namespace: "team-a", Placement: "p", Drift: fleetv1alpha1.DriftCorrect, Now: now}
	edited := memberCopy(flagSet("off"), "p", other, true)
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

func TestWroteLast(t *testing.T) {
	at := func(s int) *metav1.Time { t := metav1.NewTime(time.Unix(int64(s), 0)); return &t }
	ff := &v1beta1.FeatureFlag{}
	ff.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: fleetv1alpha1.FieldManager, Time: at(10)},
		{Manager: "flagplane", Subresource: "status", Time: at(30)},
	}
	if !wroteLast(ff) {
		t.Error("only the hub wrote the spec: wroteLast = false")
	}
	ff.ManagedFields = append(ff.ManagedFields, metav1.ManagedFieldsEntry{Manager: "kubectl-edit", Time: at(20)})
	if wroteLast(ff) {
		t.Error("kubectl-edit wrote after the hub: wroteLast = true")
	}
}
