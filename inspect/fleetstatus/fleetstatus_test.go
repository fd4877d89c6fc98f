package fleetstatus

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	fleetv1alpha1 "github.com/flagplane/flagplane/api/fleet/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestWrite")

var now = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func heard(ago time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-ago)} }

const (
	hubRev = "0123456789abcdef0123456789abcdef"
	oldRev = "fedcba9876543210fedcba9876543210"
)

// placements are two placements of shop/checkout, given out of order, one
// of another flag set, and one of checkout in another namespace.
func placements() []fleetv1alpha1.FeatureFlagPlacement {
	placement := func(ns, name, target string, generation int64, st fleetv1alpha1.FeatureFlagPlacementStatus) fleetv1alpha1.FeatureFlagPlacement {
		return fleetv1alpha1.FeatureFlagPlacement{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: generation},
			Spec:       fleetv1alpha1.FeatureFlagPlacementSpec{TargetRef: fleetv1alpha1.FlagSetTargetReference{Name: target}},
			Status:     st,
		}
	}
	return []fleetv1alpha1.FeatureFlagPlacement{
		placement("shop", "to-prod", "checkout", 2, fleetv1alpha1.FeatureFlagPlacementStatus{
			ObservedGeneration: 2, Revision: hubRev, Current: "1/4",
			Conditions: []metav1.Condition{
				{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"},
				{Type: "Ready", Status: metav1.ConditionFalse, Reason: "ClustersNotCurrent", Message: "3 of 4 clusters\nare not current"},
			},
			Clusters: []fleetv1alpha1.ClusterPlacementStatus{
				{Cluster: "prod-eu", State: fleetv1alpha1.ClusterBehind, Revision: oldRev, Delivered: "2/2", Confirmed: "3/4", LastHeard: heard(2 * time.Second),
					Message: "the member confirms revision fedcba987654, not 0123456789ab"},
				{Cluster: "prod-us", State: fleetv1alpha1.ClusterUnknown, Revision: hubRev, Confirmed: "4/4", LastHeard: heard(3 * time.Minute),
					Message: "the hub cannot reach the member: dial tcp: i/o timeout"},
				{Cluster: "prod-ap", State: fleetv1alpha1.ClusterNotGranted, Message: "no FleetGrant grants namespace shop on this cluster"},
				{Cluster: "prod-ca", State: fleetv1alpha1.ClusterCurrent, Revision: hubRev, Delivered: "1/1", Confirmed: "2/2", LastHeard: heard(time.Second)},
			},
		}),
		placement("shop", "to-dev", "checkout", 3, fleetv1alpha1.FeatureFlagPlacementStatus{
			ObservedGeneration: 2, Revision: hubRev, Current: "1/1",
			Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"}, {Type: "Ready", Status: metav1.ConditionTrue, Reason: "Current"}},
			Clusters: []fleetv1alpha1.ClusterPlacementStatus{
				{Cluster: "dev", State: fleetv1alpha1.ClusterCurrent, Revision: hubRev, Confirmed: "1/1", LastHeard: heard(4 * time.Second)},
			},
		}),
		placement("shop", "pricing-everywhere", "pricing", 1, fleetv1alpha1.FeatureFlagPlacementStatus{Revision: oldRev, Current: "0/0"}),
		placement("bank", "checkout", "checkout", 1, fleetv1alpha1.FeatureFlagPlacementStatus{Revision: oldRev, Current: "0/0"}),
	}
}

// TestWrite: the text and the JSON of the report, as testdata holds them.
func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		name, golden string
		placements   []fleetv1alpha1.FeatureFlagPlacement
	}{
		{"two placements, clusters in every state", "checkout", placements()},
		{"a placement the hub has not written yet, one that is not accepted", "new", []fleetv1alpha1.FeatureFlagPlacement{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "fresh", Generation: 1},
				Spec: fleetv1alpha1.FeatureFlagPlacementSpec{TargetRef: fleetv1alpha1.FlagSetTargetReference{Name: "checkout"}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "gone", Generation: 1},
				Spec: fleetv1alpha1.FeatureFlagPlacementSpec{TargetRef: fleetv1alpha1.FlagSetTargetReference{Name: "checkout"}},
				Status: fleetv1alpha1.FeatureFlagPlacementStatus{ObservedGeneration: 1, Current: "0/0", Conditions: []metav1.Condition{
					{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "TargetNotFound", Message: "FeatureFlag shop/checkout does not exist on the hub"}}}},
		}},
		{"no placement", "none", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := New("shop", "checkout", tc.placements)
			if tc.golden == "checkout" {
				r.Rollouts = Rollouts("checkout", policies())
			}
			var text strings.Builder
			g.Expect(Write(&text, r, now)).To(Succeed())
			js, err := json.MarshalIndent(r, "", "  ")
			g.Expect(err).NotTo(HaveOccurred())
			for ext, got := range map[string]string{".txt": text.String(), ".json": string(js) + "\n"} {
				path := filepath.Join("testdata", tc.golden+ext)
				if *update {
					g.Expect(os.WriteFile(path, []byte(got), 0o644)).To(Succeed())
				}
				want, err := os.ReadFile(path)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(Equal(string(want)), path)
			}
		})
	}
}

func policies() []deliveryv1alpha1.FeatureFlagRolloutPolicy {
	clusterStep := deliveryv1alpha1.RolloutStep{ClusterSelector: &metav1.LabelSelector{}}
	return []deliveryv1alpha1.FeatureFlagRolloutPolicy{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "in-one-cluster"},
			Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{TargetRef: deliveryv1alpha1.FlagSetTargetReference{Name: "checkout"},
				Steps: []deliveryv1alpha1.RolloutStep{{NamespaceSelector: &metav1.LabelSelector{}}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "dev-then-prod"},
			Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{TargetRef: deliveryv1alpha1.FlagSetTargetReference{Name: "checkout"},
				Steps: []deliveryv1alpha1.RolloutStep{clusterStep, clusterStep}},
			Status: deliveryv1alpha1.FeatureFlagRolloutPolicyStatus{Phase: deliveryv1alpha1.PhaseHalted, Step: 1,
				StableRevision: "0123456789abcdef", TargetRevision: "fedcba9876543210",
				Message: "gate Confirmed (spec.gates[0]) failed: cluster prod-eu did not confirm revision fedcba987654 within 1m0s of step 2's start"}},
	}
}

// TestRollouts: only the policies of cluster steps that target the flag set.
func TestRollouts(t *testing.T) {
	g := NewWithT(t)
	r := Rollouts("checkout", policies())
	g.Expect(r).To(HaveLen(1))
	g.Expect(r[0].Name).To(Equal("dev-then-prod"))
	g.Expect(Rollouts("pricing", policies())).To(BeEmpty())
}

// TestNew: only the placements of the FeatureFlag, by name; a status of an
// older generation is stale.
func TestNew(t *testing.T) {
	g := NewWithT(t)
	r := New("shop", "checkout", placements())
	g.Expect(r.Placements).To(HaveLen(2))
	g.Expect(r.Placements[0].Name).To(Equal("to-dev"))
	g.Expect(r.Placements[0].Stale).To(BeTrue())
	g.Expect(r.Placements[1].Name).To(Equal("to-prod"))
	g.Expect(r.Placements[1].Stale).To(BeFalse())
	g.Expect(r.Placements[1].Clusters[0].Cluster).To(Equal("prod-eu"), "the status's order")
}
