package fleet

import (
	"context"
	"net"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	fleetv1alpha1 "github.com/flagplane/flagplane/api/fleet/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/flagdapi"
	"github.com/flagplane/flagplane/test/fleetenv"
	"github.com/flagplane/flagplane/test/realnode"
	fleetwf "github.com/flagplane/flagplane/workflows/fleet"
)

// hubIdentity is the member's name for the hub, as config/fleet/member
// makes it.
const hubIdentity = fleetenv.HubIdentity

func grant(name string, namespaces []string, selector map[string]string) *fleetv1alpha1.FleetGrant {
	return &fleetv1alpha1.FleetGrant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: inventoryNS},
		Spec: fleetv1alpha1.FleetGrantSpec{Namespaces: namespaces,
			ClusterSelector: metav1.LabelSelector{MatchLabels: selector}}}
}

func placement(ns, name, flagSet string, selector map[string]string) *fleetv1alpha1.FeatureFlagPlacement {
	return &fleetv1alpha1.FeatureFlagPlacement{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: fleetv1alpha1.FeatureFlagPlacementSpec{
			TargetRef:       fleetv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: "FeatureFlag", Name: flagSet},
			ClusterSelector: metav1.LabelSelector{MatchLabels: selector}}}
}

// states reads the placement's status as cluster → state.
func states(ctx context.Context, key client.ObjectKey) map[string]fleetv1alpha1.ClusterPlacementStatus {
	var p fleetv1alpha1.FeatureFlagPlacement
	if err := hubC.Get(ctx, key, &p); err != nil {
		return nil
	}
	out := map[string]fleetv1alpha1.ClusterPlacementStatus{}
	for _, c := range p.Status.Clusters {
		out[c.Cluster] = c
	}
	return out
}

func stateOf(ctx context.Context, key client.ObjectKey, cluster string) func() fleetv1alpha1.ClusterState {
	return func() fleetv1alpha1.ClusterState { return states(ctx, key)[cluster].State }
}

// memberCopy reads a member's FeatureFlag as its admin sees it.
func memberCopy(ctx context.Context, m *fleetenv.Member, ns, name string) (*v1beta1.FeatureFlag, error) {
	var ff v1beta1.FeatureFlag
	err := m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ff)
	return &ff, err
}

// servedBy is the revision a member's flagplane says its copy serves, once
// it is Ready for the copy's newest spec.
func servedBy(ctx context.Context, m *fleetenv.Member, ns, name string) func() string {
	return func() string {
		ff, err := memberCopy(ctx, m, ns, name)
		if err != nil {
			return ""
		}
		ready := meta.FindStatusCondition(ff.Status.Conditions, v1beta1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != ff.Generation {
			return ""
		}
		return ff.Status.Revision
	}
}

func editHub(ctx context.Context, ns, name, variant string) string {
	var rev string
	Eventually(func() error {
		var ff v1beta1.FeatureFlag
		if err := hubC.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ff); err != nil {
			return err
		}
		f := ff.Spec.FlagSpec.Flags[fixtures.FlagKey]
		f.DefaultVariant = variant
		ff.Spec.FlagSpec.Flags[fixtures.FlagKey] = f
		rev = fleetwf.Revision(&ff)
		return hubC.Update(ctx, &ff)
	}).Should(Succeed())
	return rev
}

var _ = Describe("a fleet hub", Ordered, func() {
	const flagSet = "checkout"
	key := client.ObjectKey{Namespace: teamA, Name: "checkout-everywhere"}
	var rev1 string
	// servedByStaging asks the flagd of the real node's pod which variant
	// it serves; set by the real node's first spec.
	var servedByStaging func(context.Context) string

	BeforeAll(func(ctx SpecContext) {
		ff := fixtures.FlagSet(teamA, flagSet, "off")
		Expect(hubC.Create(ctx, ff)).To(Succeed())
		rev1 = fleetwf.Revision(ff)
		Expect(rev1).NotTo(BeEmpty())
		Expect(hubC.Create(ctx, placement(teamA, key.Name, flagSet, nil))).To(Succeed())
	})

	It("places the FeatureFlag on every granted member, under its identity there, and each confirms it", func(ctx SpecContext) {
		for _, m := range members {
			Eventually(servedBy(ctx, m, teamA, flagSet)).WithTimeout(time.Minute).Should(Equal(rev1),
				"member %s serves the hub's revision, as its own flagplane computes it", m.Name)
			ff, err := memberCopy(ctx, m, teamA, flagSet)
			Expect(err).NotTo(HaveOccurred())
			Expect(ff.Labels).To(HaveKeyWithValue(fleetv1alpha1.PlacementLabel, key.Name))
			Expect(ff.Annotations).To(HaveKeyWithValue(deliveryv1alpha1.SpecAuthorAnnotation, hubIdentity),
				"the member's API server authenticated the hub's writer as its ServiceAccount")
		}
		Eventually(func() string {
			var p fleetv1alpha1.FeatureFlagPlacement
			Expect(hubC.Get(ctx, key, &p)).To(Succeed())
			return p.Status.Current + " " + p.Status.Revision
		}).WithTimeout(time.Minute).Should(Equal("3/3 " + rev1))
		for _, m := range members {
			st := states(ctx, key)[m.Name]
			Expect(st.State).To(Equal(fleetv1alpha1.ClusterCurrent))
			Expect(st.Revision).To(Equal(rev1))
			Expect(st.LastHeard).NotTo(BeNil())
		}
	})

	It("writes nothing where the placement's namespace has no grant", func(ctx SpecContext) {
		Expect(hubC.Create(ctx, fixtures.FlagSet(teamB, flagSet, "on"))).To(Succeed())
		bKey := client.ObjectKey{Namespace: teamB, Name: "b"}
		Expect(hubC.Create(ctx, placement(teamB, bKey.Name, flagSet, nil))).To(Succeed())
		for _, m := range members {
			Eventually(stateOf(ctx, bKey, m.Name)).Should(Equal(fleetv1alpha1.ClusterNotGranted))
		}
		Consistently(func() bool {
			for _, m := range members {
				if _, err := memberCopy(ctx, m, teamB, flagSet); !apierrors.IsNotFound(err) {
					return false
				}
			}
			return true
		}).WithTimeout(3 * time.Second).Should(BeTrue())
	})

	It("is confined on each member to FeatureFlags it placed, in granted namespaces", func(ctx SpecContext) {
		m := members[0]
		for _, q := range []struct{ verb, resource, ns, want string }{
			{"update", "featureflags.core.openfeature.dev", teamA, "yes"},
			{"create", "featureflags.core.openfeature.dev", teamB, "no"},
			{"create", "configmaps", teamA, "no"},
			{"list", "secrets", teamA, "no"},
			{"create", "featureflagsources.core.openfeature.dev", teamA, "no"},
			{"list", "featureflags.core.openfeature.dev", "", "no"},
		} {
			args := []string{"auth", "can-i", q.verb, q.resource, "--as", hubIdentity}
			if q.ns != "" {
				args = append(args, "-n", q.ns)
			} else {
				args = append(args, "--all-namespaces")
			}
			out, _ := m.Kubectl(args...)
			Expect(strings.TrimSpace(out)).To(Equal(q.want), "%v", args)
		}
		// RBAC allows FeatureFlags in team-a; the member's admission policy
		// still refuses one the hub did not place.
		mine := fixtures.FlagSet(teamA, "members-own", "on")
		Expect(m.Client.Create(ctx, mine)).To(Succeed())
		asHub := rest.CopyConfig(m.Config)
		asHub.Impersonate = rest.ImpersonationConfig{UserName: hubIdentity}
		hc, err := client.New(asHub, client.Options{Scheme: fl.Scheme})
		Expect(err).NotTo(HaveOccurred())
		// Read and written again on a conflict with the member's own status
		// writes, which the API server checks before admission.
		Eventually(func() error {
			if err := hc.Get(ctx, client.ObjectKeyFromObject(mine), mine); err != nil {
				return err
			}
			mine.Spec.FlagSpec.Flags[fixtures.FlagKey] = v1beta1.Flag{State: "ENABLED",
				Variants: mine.Spec.FlagSpec.Flags[fixtures.FlagKey].Variants, DefaultVariant: "off"}
			return hc.Update(ctx, mine)
		}).Should(MatchError(ContainSubstring("the fleet hub may write only the FeatureFlags it placed")))
		Expect(hc.Delete(ctx, mine)).NotTo(Succeed())
	})

	It("takes an edit on the hub to every member, confirmed there", func(ctx SpecContext) {
		rev2 := editHub(ctx, teamA, flagSet, "on")
		Expect(rev2).NotTo(Equal(rev1))
		for _, m := range members {
			Eventually(servedBy(ctx, m, teamA, flagSet)).WithTimeout(time.Minute).Should(Equal(rev2))
			Eventually(stateOf(ctx, key, m.Name)).Should(Equal(fleetv1alpha1.ClusterCurrent))
		}
		Expect(states(ctx, key)[members[0].Name].Revision).To(Equal(rev2))
	})

	It("says Current for the real node only once its pod's flagd serves the revision", func(ctx SpecContext) {
		staging := members[2]
		Expect(staging.Node).NotTo(BeNil(), "the third member is the real node")
		// The member's own team: a source that reads the placed FeatureFlag
		// through the file provider, and a Deployment it targets.
		src := fixtures.Source(teamA, "checkout", []v1beta1.Source{fixtures.FileRef(flagSet)}, fixtures.Targeting("Deployment", "web"))
		Expect(staging.Client.Create(ctx, src)).To(Succeed())
		web := fixtures.Deployment(teamA, "web", nil, nil)
		web.Spec.Template.Spec.Containers[0].Image = realnode.BusyboxImage
		web.Spec.Template.Spec.Containers[0].Command = []string{"sleep", "1000000"}
		web.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		Expect(staging.Client.Create(ctx, web)).To(Succeed())
		var pod corev1.Pod
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(staging.Client.List(ctx, &pods, client.InNamespace(teamA), client.MatchingLabels{"app": "web"})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(1))
			g.Expect(append(pods.Items[0].Spec.InitContainers, pods.Items[0].Spec.Containers...)).To(
				ContainElement(HaveField("Name", "flagd")), "flagd injected")
			g.Expect(pods.Items[0].Status.PodIP).NotTo(BeEmpty())
			g.Expect(pods.Items[0].Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))))
			pod = pods.Items[0]
		}).WithTimeout(3 * time.Minute).Should(Succeed())
		addr := net.JoinHostPort(pod.Status.PodIP, "8013")
		servedByStaging = func(ctx context.Context) string {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			ev, err := flagdapi.Resolve(rctx, addr, flagdapi.Boolean, fixtures.FlagKey, nil)
			if err != nil {
				return "error: " + err.Error()
			}
			return ev.Variant
		}
		variant := func() string { return servedByStaging(ctx) }
		current := func(rev string) bool {
			st := states(ctx, key)[staging.Name]
			return st.State == fleetv1alpha1.ClusterCurrent && st.Revision == rev
		}
		for _, v := range []string{"off", "on"} {
			rev := editHub(ctx, teamA, flagSet, v)
			// Status first, flagd right after: the hub may never say
			// Current while the pod's flagd serves the old variant.
			deadline := time.Now().Add(2 * time.Minute)
			for !current(rev) {
				Expect(time.Now().Before(deadline)).To(BeTrue(), "the hub never said staging serves %s", rev)
				time.Sleep(100 * time.Millisecond)
			}
			Expect(variant()).To(Equal(v), "the hub said staging serves %s before its flagd did", rev)
		}
	})

	It("shows the real node Unknown while its API server is stopped; its flagd keeps serving, and it converges", func(ctx SpecContext) {
		staging := members[2]
		Expect(servedByStaging).NotTo(BeNil())
		hubRev := fleetwf.Revision(hubFlagSet(ctx, teamA, flagSet))
		Eventually(stateOf(ctx, key, staging.Name)).Should(Equal(fleetv1alpha1.ClusterCurrent))
		before := servedByStaging(ctx)
		Expect(before).To(BeElementOf("on", "off"))

		Expect(staging.Node.Pause(realnode.APIServer)).To(Succeed())
		resumed := false
		DeferCleanup(func() {
			if !resumed {
				Expect(staging.Node.Resume(realnode.APIServer)).To(Succeed())
			}
		})
		Eventually(stateOf(ctx, key, staging.Name)).Should(Equal(fleetv1alpha1.ClusterUnknown))
		st := states(ctx, key)[staging.Name]
		Expect(st.Message).To(ContainSubstring("no word from the member's API server"))
		Expect(st.Revision).To(Equal(hubRev), "the last revision the hub heard of")

		next := map[string]string{"on": "off", "off": "on"}[before]
		rev := editHub(ctx, teamA, flagSet, next)
		Consistently(func() string { return servedByStaging(ctx) }).WithTimeout(5*time.Second).Should(Equal(before),
			"the pod's flagd keeps serving the last revision with its API server stopped")
		Expect(stateOf(ctx, key, staging.Name)()).To(Equal(fleetv1alpha1.ClusterUnknown))

		Expect(staging.Node.Resume(realnode.APIServer)).To(Succeed())
		resumed = true
		Eventually(func() bool {
			st := states(ctx, key)[staging.Name]
			return st.State == fleetv1alpha1.ClusterCurrent && st.Revision == rev
		}).WithTimeout(3 * time.Minute).Should(BeTrue())
		Expect(servedByStaging(ctx)).To(Equal(next), "Current on the hub: the pod's flagd serves the edit")
	})

	It("puts back a member's copy edited by hand, or reports it under drift Report", func(ctx SpecContext) {
		m := members[0]
		hubRev := fleetwf.Revision(hubFlagSet(ctx, teamA, flagSet))
		handEdit(ctx, m, teamA, flagSet)
		Eventually(servedBy(ctx, m, teamA, flagSet)).WithTimeout(time.Minute).Should(Equal(hubRev),
			"drift Correct writes the hub's spec back")

		changePlacement(ctx, key, func(p *fleetv1alpha1.FeatureFlagPlacement) { p.Spec.Drift = fleetv1alpha1.DriftReport })
		edited := handEdit(ctx, m, teamA, flagSet)
		Eventually(stateOf(ctx, key, m.Name)).Should(Equal(fleetv1alpha1.ClusterDrifted))
		Expect(states(ctx, key)[m.Name].Message).To(ContainSubstring("drift: Report leaves it"))
		Consistently(func() string {
			ff, err := memberCopy(ctx, m, teamA, flagSet)
			Expect(err).NotTo(HaveOccurred())
			return fleetwf.Revision(ff)
		}).WithTimeout(3 * time.Second).Should(Equal(edited))

		changePlacement(ctx, key, func(p *fleetv1alpha1.FeatureFlagPlacement) { p.Spec.Drift = fleetv1alpha1.DriftCorrect })
		Eventually(servedBy(ctx, m, teamA, flagSet)).WithTimeout(time.Minute).Should(Equal(hubRev))
		Eventually(stateOf(ctx, key, m.Name)).Should(Equal(fleetv1alpha1.ClusterCurrent))
	})

	It("shows a member cut off as Unknown with its last word; the member keeps serving and converges on rejoin", func(ctx SpecContext) {
		prod := members[1]
		before := servedBy(ctx, prod, teamA, flagSet)()
		Expect(before).NotTo(BeEmpty())
		prod.Fwd.Cut()
		DeferCleanup(prod.Fwd.Rejoin)
		Eventually(stateOf(ctx, key, prod.Name)).Should(Equal(fleetv1alpha1.ClusterUnknown))
		st := states(ctx, key)[prod.Name]
		Expect(st.LastHeard).NotTo(BeNil())
		Expect(st.Message).To(ContainSubstring("no word from the member's API server"))

		rev3 := editHub(ctx, teamA, flagSet, "off")
		Eventually(servedBy(ctx, members[0], teamA, flagSet)).WithTimeout(time.Minute).Should(Equal(rev3))
		Eventually(func() string {
			var p fleetv1alpha1.FeatureFlagPlacement
			Expect(hubC.Get(ctx, key, &p)).To(Succeed())
			return p.Status.Current
		}).Should(Equal("2/3"), "the cut-off member never counts as current")
		Consistently(stateOf(ctx, key, prod.Name)).WithTimeout(3 * time.Second).Should(Equal(fleetv1alpha1.ClusterUnknown))
		Expect(servedBy(ctx, prod, teamA, flagSet)()).To(Equal(before), "the member keeps serving its last revision")

		prod.Fwd.Rejoin()
		Eventually(servedBy(ctx, prod, teamA, flagSet)).WithTimeout(time.Minute).Should(Equal(rev3))
		Eventually(stateOf(ctx, key, prod.Name)).Should(Equal(fleetv1alpha1.ClusterCurrent))
	})

	It("reaches a member again after its credentials are rotated", func(ctx SpecContext) {
		m := members[0]
		// A new ServiceAccount of the same name: every token of the old one
		// is refused from now on.
		out, err := m.Kubectl("delete", "serviceaccount", "-n", "flagplane-fleet", "flagplane-fleet")
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = m.Kubectl("create", "serviceaccount", "-n", "flagplane-fleet", "flagplane-fleet")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(fl.WriteToken(ctx, m)).To(Succeed())
		rev := editHub(ctx, teamA, flagSet, "on")
		Eventually(servedBy(ctx, m, teamA, flagSet)).WithTimeout(time.Minute).Should(Equal(rev))
		Eventually(stateOf(ctx, key, m.Name)).Should(Equal(fleetv1alpha1.ClusterCurrent))
	})

	It("stages an edit cluster by cluster, and a failing gate returns every cluster to the stable revision", func(ctx SpecContext) {
		dev, prod := members[0], members[1]
		stable := fleetwf.Revision(hubFlagSet(ctx, teamA, flagSet))
		Eventually(func() []string {
			return []string{servedBy(ctx, dev, teamA, flagSet)(), servedBy(ctx, prod, teamA, flagSet)()}
		}).
			WithTimeout(time.Minute).Should(HaveEach(stable))
		pause := metav1.Duration{Duration: 3 * time.Second}
		policy := &deliveryv1alpha1.FeatureFlagRolloutPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "dev-then-prod"},
			Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
				TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: "FeatureFlag", Name: flagSet},
				Steps: []deliveryv1alpha1.RolloutStep{
					{Name: "dev", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}, Pause: &pause},
					{Name: "prod", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}},
				},
				Gates: []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GateConfirmed, For: &metav1.Duration{Duration: 8 * time.Second}}},
			}}
		Expect(hubC.Create(ctx, policy)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(hubC.Delete(ctx, policy))).To(Succeed()) })
		phase := func() deliveryv1alpha1.RolloutPhase {
			Expect(hubC.Get(ctx, client.ObjectKeyFromObject(policy), policy)).To(Succeed())
			return policy.Status.Phase
		}
		Eventually(phase).Should(Equal(deliveryv1alpha1.PhaseCompleted))

		// dev first; prod keeps the stable revision until dev has served
		// the edit for the step's pause.
		target := editHub(ctx, teamA, flagSet, "on")
		Eventually(servedBy(ctx, dev, teamA, flagSet)).WithTimeout(time.Minute).Should(Equal(target))
		Expect(servedBy(ctx, prod, teamA, flagSet)()).To(Equal(stable), "prod waits for dev's step")
		Expect(states(ctx, key)[prod.Name].Planned).To(Equal(stable))
		Eventually(servedBy(ctx, prod, teamA, flagSet)).WithTimeout(time.Minute).Should(Equal(target))
		Eventually(phase).Should(Equal(deliveryv1alpha1.PhaseCompleted))
		Expect(policy.Status.StableRevision).To(Equal(target))

		// prod cut off during the next edit: dev gets it, prod's step
		// starts and never confirms, the gate fails, and dev returns to
		// the stable revision (its spec from dev's own history).
		prod.Fwd.Cut()
		DeferCleanup(prod.Fwd.Rejoin)
		Eventually(stateOf(ctx, key, prod.Name)).Should(Equal(fleetv1alpha1.ClusterUnknown))
		halted := editHub(ctx, teamA, flagSet, "off")
		Eventually(servedBy(ctx, dev, teamA, flagSet)).WithTimeout(time.Minute).Should(Equal(halted))
		Eventually(phase).WithTimeout(time.Minute).Should(Equal(deliveryv1alpha1.PhaseHalted))
		Expect(policy.Status.Message).To(ContainSubstring("cluster prod did not confirm"))
		Eventually(servedBy(ctx, dev, teamA, flagSet)).WithTimeout(time.Minute).Should(Equal(target),
			"the halt writes the stable spec back to dev")
		prod.Fwd.Rejoin()
		Eventually(stateOf(ctx, key, prod.Name)).Should(Equal(fleetv1alpha1.ClusterCurrent))
		Consistently(servedBy(ctx, prod, teamA, flagSet)).WithTimeout(3*time.Second).Should(Equal(target),
			"prod never gets the halted revision")
		Expect(phase()).To(Equal(deliveryv1alpha1.PhaseHalted))
	})

	It("leaves the members serving while the hub is down, and writes nothing that regresses when it returns", func(ctx SpecContext) {
		generations := func() map[string]int64 {
			out := map[string]int64{}
			for _, m := range members {
				ff, err := memberCopy(ctx, m, teamA, flagSet)
				Expect(err).NotTo(HaveOccurred())
				out[m.Name] = ff.Generation
			}
			return out
		}
		served := func() map[string]string {
			out := map[string]string{}
			for _, m := range members {
				out[m.Name] = servedBy(ctx, m, teamA, flagSet)()
			}
			return out
		}
		hubRev := fleetwf.Revision(hubFlagSet(ctx, teamA, flagSet))
		Eventually(served).Should(HaveEach(hubRev))
		before := generations()

		Expect(fl.StopHub()).To(Succeed())
		Consistently(served).WithTimeout(3*time.Second).Should(HaveEach(hubRev), "members serve without the hub")
		Expect(fl.StartHub()).To(Succeed())
		Eventually(func() string {
			var p fleetv1alpha1.FeatureFlagPlacement
			Expect(hubC.Get(ctx, key, &p)).To(Succeed())
			return p.Status.Current
		}).Should(Equal("3/3"))
		Consistently(generations).WithTimeout(5*time.Second).Should(Equal(before),
			"a hub that returns to the same objects writes nothing into the members")

		rev := editHub(ctx, teamA, flagSet, "off")
		for _, m := range members {
			Eventually(servedBy(ctx, m, teamA, flagSet)).WithTimeout(time.Minute).Should(Equal(rev))
		}
	})

	It("deletes the copy of a cluster it no longer selects, and leaves the copies of a cluster that left the inventory", func(ctx SpecContext) {
		dev, prod := members[0], members[1]
		changePlacement(ctx, key, func(p *fleetv1alpha1.FeatureFlagPlacement) {
			p.Spec.ClusterSelector = metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}
		})
		Eventually(func() bool {
			_, err := memberCopy(ctx, prod, teamA, flagSet)
			return apierrors.IsNotFound(err)
		}).WithTimeout(30 * time.Second).Should(BeTrue())
		Eventually(func() []string {
			var names []string
			for n := range states(ctx, key) {
				names = append(names, n)
			}
			return names
		}).Should(ConsistOf(dev.Name))

		Expect(hubC.Delete(ctx, &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{
			Namespace: inventoryNS, Name: dev.Name}})).To(Succeed())
		Eventually(func() map[string]fleetv1alpha1.ClusterPlacementStatus { return states(ctx, key) }).Should(BeEmpty())
		Consistently(func() error {
			_, err := memberCopy(ctx, dev, teamA, flagSet)
			return err
		}).WithTimeout(3*time.Second).Should(Succeed(), "the hub lets go of a cluster that left; its copy stays")
		Eventually(func() bool {
			var evs corev1.EventList
			Expect(hubC.List(ctx, &evs, client.InNamespace(teamA))).To(Succeed())
			for _, e := range evs.Items {
				if e.Reason == fleetwf.EventClusterLeft && strings.Contains(e.Message, dev.Name) {
					return true
				}
			}
			return false
		}).Should(BeTrue())
	})
})

// changePlacement changes a placement's spec, again on a conflict with the
// hub's status writes.
func changePlacement(ctx context.Context, key client.ObjectKey, change func(*fleetv1alpha1.FeatureFlagPlacement)) {
	Eventually(func() error {
		var p fleetv1alpha1.FeatureFlagPlacement
		if err := hubC.Get(ctx, key, &p); err != nil {
			return err
		}
		change(&p)
		return hubC.Update(ctx, &p)
	}).Should(Succeed())
}

func hubFlagSet(ctx context.Context, ns, name string) *v1beta1.FeatureFlag {
	var ff v1beta1.FeatureFlag
	Expect(hubC.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ff)).To(Succeed())
	return &ff
}

// handEdit changes a member's copy as its admin would, and returns the
// revision it then holds.
func handEdit(ctx context.Context, m *fleetenv.Member, ns, name string) string {
	var rev string
	Eventually(func() error {
		ff, err := memberCopy(ctx, m, ns, name)
		if err != nil {
			return err
		}
		f := ff.Spec.FlagSpec.Flags[fixtures.FlagKey]
		f.Metadata = []byte(`{"hand":"` + time.Now().Format(time.RFC3339Nano) + `"}`)
		ff.Spec.FlagSpec.Flags[fixtures.FlagKey] = f
		rev = fleetwf.Revision(ff)
		return m.Client.Update(ctx, ff)
	}).Should(Succeed())
	return rev
}

// dumpOnFailure prints what the hub and the members hold, for a failed
// spec.
var _ = AfterEach(func(ctx SpecContext) {
	if !CurrentSpecReport().Failed() {
		return
	}
	var ps fleetv1alpha1.FeatureFlagPlacementList
	if err := hubC.List(ctx, &ps); err == nil {
		for _, p := range ps.Items {
			GinkgoWriter.Printf("placement %s/%s status: %+v\n", p.Namespace, p.Name, p.Status)
		}
	}
	for _, m := range members {
		var ffs v1beta1.FeatureFlagList
		if err := m.Client.List(ctx, &ffs); err == nil {
			for _, ff := range ffs.Items {
				GinkgoWriter.Printf("member %s: %s/%s labels %v status %+v\n", m.Name, ff.Namespace, ff.Name, ff.Labels, ff.Status)
			}
		}
	}
})
