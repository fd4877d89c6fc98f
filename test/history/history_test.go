package history

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/internal/bigflagset"
	"github.com/flagplane/flagplane/test/internal/flagplanecli"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/history"
)

// flagKey is the one flag of flagSet.
const flagKey = "banner-color"

// flagSet is a FeatureFlag with one flag, flagKey, serving value: each
// value is another spec.
func flagSet(ns, name, value string) *v1beta1.FeatureFlag {
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	setValue(ff, value)
	return ff
}

func setValue(ff *v1beta1.FeatureFlag, value string) {
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{flagKey: {State: v1beta1.FlagStateEnabled, DefaultVariant: "current",
		Variants: json.RawMessage(fmt.Sprintf(`{"current":%q}`, value))}}
}

// edit changes the FeatureFlag with c (whose field manager is the
// author), retrying on a conflict with flagplane's status writes.
func edit(ctx context.Context, c client.Client, ns, name string, change func(*v1beta1.FeatureFlag)) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ff := &v1beta1.FeatureFlag{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ff); err != nil {
			return err
		}
		change(ff)
		return c.Update(ctx, ff)
	})).To(Succeed())
}

// revisions are the revisions of ns/name the API server holds, oldest first.
func revisions(ctx context.Context, ns, name string) []*deliveryv1alpha1.FeatureFlagRevision {
	GinkgoHelper()
	var list deliveryv1alpha1.FeatureFlagRevisionList
	Expect(k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{deliveryv1alpha1.FlagSetLabel: history.FlagSetLabelValue(name)})).To(Succeed())
	return history.Sorted(list.Items)
}

// numbers are the numbers of revisions, in order.
func numbers(revs []*deliveryv1alpha1.FeatureFlagRevision) []int64 {
	out := []int64{}
	for _, r := range revs {
		out = append(out, r.Spec.Number)
	}
	return out
}

// getFlagSet reads the FeatureFlag ns/name.
func getFlagSet(ctx context.Context, g Gomega, ns, name string) *v1beta1.FeatureFlag {
	ff := &v1beta1.FeatureFlag{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ff)).To(Succeed())
	return ff
}

// served is the FeatureFlag's status.revision.
func served(ctx context.Context, ns, name string) string {
	GinkgoHelper()
	ff := &v1beta1.FeatureFlag{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ff)).To(Succeed())
	return ff.Status.Revision
}

// servedOtherThan waits until the FeatureFlag serves a revision other than
// before, and returns it.
func servedOtherThan(ctx context.Context, ns, name, before string) string {
	GinkgoHelper()
	var now string
	Eventually(func(g Gomega) {
		now = served(ctx, ns, name)
		g.Expect(now).NotTo(BeEmpty())
		g.Expect(now).NotTo(Equal(before))
	}).Should(Succeed())
	return now
}

// expectHistory waits until the revisions of ns/name are exactly want (by
// number, hash, author, field manager and cause), and stay so.
func expectHistory(ctx context.Context, ns, name string, want ...deliveryv1alpha1.FeatureFlagRevisionSpec) {
	GinkgoHelper()
	line := func(s deliveryv1alpha1.FeatureFlagRevisionSpec) string {
		return fmt.Sprintf("%d %s by %q as %q: %q", s.Number, s.Revision, s.CreatedBy, s.FieldManager, s.ChangeCause)
	}
	summary := func() []string {
		var out []string
		for _, r := range revisions(ctx, ns, name) {
			out = append(out, line(r.Spec))
		}
		return out
	}
	var wantSummary []string
	for _, w := range want {
		wantSummary = append(wantSummary, line(w))
	}
	Eventually(summary).Should(Equal(wantSummary))
	Consistently(summary).Should(Equal(wantSummary), "exactly one revision per accepted spec")
}

// short is a revision as the command line shows it.
func short(hash string) string {
	GinkgoHelper()
	Expect(hash).To(HaveLen(32), "a full revision")
	return topology.ShortRevision(hash)
}

// warnings are the notes of the Warning Events of reason on the
// FeatureFlag ns/name.
func warnings(ctx context.Context, ns, name, reason string) []string {
	GinkgoHelper()
	var events eventsv1.EventList
	Expect(k8s.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
	var notes []string
	for _, e := range events.Items {
		if e.Reason == reason && e.Regarding.Kind == v1beta1.FeatureFlagKind && e.Regarding.Name == name && e.Type == "Warning" {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// rev is a revision's spec as expectHistory compares it: by is the user
// the API server authenticated, as the field manager its client named.
func rev(number int64, hash, by, as, cause string) deliveryv1alpha1.FeatureFlagRevisionSpec {
	return deliveryv1alpha1.FeatureFlagRevisionSpec{Number: number, Revision: hash, CreatedBy: by, FieldManager: as, ChangeCause: cause}
}

// as is a client of the user (impersonated by the suite's admin, in
// system:masters) whose writes name fieldManager.
func as(user, fieldManager string) client.Client {
	GinkgoHelper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters"}}
	c, err := client.New(cfg, client.Options{Scheme: cp.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return client.WithFieldOwner(c, fieldManager)
}

// whoami is the user the API server takes the suite's admin kubeconfig for.
func whoami(ctx context.Context) string {
	GinkgoHelper()
	review := &authenticationv1.SelfSubjectReview{}
	Expect(k8s.Create(ctx, review)).To(Succeed())
	Expect(review.Status.UserInfo.Username).NotTo(BeEmpty())
	return review.Status.UserInfo.Username
}

// author is the FeatureFlag's SpecAuthorAnnotation.
func author(ctx context.Context, ns, name string) string {
	GinkgoHelper()
	ff := &v1beta1.FeatureFlag{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ff)).To(Succeed())
	return ff.Annotations[deliveryv1alpha1.SpecAuthorAnnotation]
}

var _ = Describe("The revision history", func() {
	It("records every accepted edit once, with its hash, author and cause", func(ctx SpecContext) {
		ns := newNamespace(ctx, "history")
		bob := as("bob", "bob-create")
		alice := as("alice", "alice-edit")

		ff := flagSet(ns, "checkout", "red")
		ff.Annotations = map[string]string{deliveryv1alpha1.ChangeCauseAnnotation: "first colour"}
		Expect(bob.Create(ctx, ff)).To(Succeed())
		h1 := servedOtherThan(ctx, ns, "checkout", "")
		Eventually(func() []int64 { return numbers(revisions(ctx, ns, "checkout")) }).Should(Equal([]int64{1}))

		first := revisions(ctx, ns, "checkout")[0]
		Expect(first.Name).To(Equal("checkout-1"))
		Expect(first.Labels).To(HaveKeyWithValue(deliveryv1alpha1.FlagSetLabel, "checkout"))
		Expect(first.Spec.FlagSet).To(Equal("checkout"))
		Expect(first.Spec.FlagSpec).To(Equal(ff.Spec.FlagSpec))
		Expect(metav1.IsControlledBy(first, ff)).To(BeTrue(), "owned by the FeatureFlag as its controller")

		edit(ctx, alice, ns, "checkout", func(ff *v1beta1.FeatureFlag) {
			setValue(ff, "green")
			ff.Annotations[deliveryv1alpha1.ChangeCauseAnnotation] = "greener"
		})
		h2 := servedOtherThan(ctx, ns, "checkout", h1)
		expectHistory(ctx, ns, "checkout", rev(1, h1, "bob", "bob-create", "first colour"), rev(2, h2, "alice", "alice-edit", "greener"))

		// What changes no spec records nothing.
		edit(ctx, bob, ns, "checkout", func(ff *v1beta1.FeatureFlag) { ff.Labels = map[string]string{"team": "shop"} })
		expectHistory(ctx, ns, "checkout", rev(1, h1, "bob", "bob-create", "first colour"), rev(2, h2, "alice", "alice-edit", "greener"))

		// The same spec again is a new revision, with the old hash.
		edit(ctx, alice, ns, "checkout", func(ff *v1beta1.FeatureFlag) {
			setValue(ff, "red")
			ff.Annotations[deliveryv1alpha1.ChangeCauseAnnotation] = "red again"
		})
		Eventually(func() string { return served(ctx, ns, "checkout") }).Should(Equal(h1))
		expectHistory(ctx, ns, "checkout", rev(1, h1, "bob", "bob-create", "first colour"), rev(2, h2, "alice", "alice-edit", "greener"),
			rev(3, h1, "alice", "alice-edit", "red again"))
	})

	It("takes who wrote a spec from the API server, whatever field manager the client names and whatever it annotates", func(ctx SpecContext) {
		ns := newNamespace(ctx, "history-author")
		// A create that names someone else as the author: the creator's.
		mallory := as("mallory", "argocd-controller")
		ff := flagSet(ns, "checkout", "red")
		ff.Annotations = map[string]string{deliveryv1alpha1.SpecAuthorAnnotation: "ceo"}
		Expect(mallory.Create(ctx, ff)).To(Succeed())
		Expect(ff.Annotations).To(HaveKeyWithValue(deliveryv1alpha1.SpecAuthorAnnotation, "mallory"), "as the API server stored it")
		h1 := servedOtherThan(ctx, ns, "checkout", "")

		// Alice writes as flagplane rollback's field manager: the
		// revision is hers, and says which tool she named.
		edit(ctx, as("alice", "flagplane-rollback"), ns, "checkout", func(ff *v1beta1.FeatureFlag) { setValue(ff, "green") })
		h2 := servedOtherThan(ctx, ns, "checkout", h1)
		expectHistory(ctx, ns, "checkout", rev(1, h1, "mallory", "argocd-controller", ""), rev(2, h2, "alice", "flagplane-rollback", ""))

		// Mallory writes the annotation alone: undone, nothing recorded.
		var forged v1beta1.FeatureFlag
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := mallory.Get(ctx, client.ObjectKey{Namespace: ns, Name: "checkout"}, &forged); err != nil {
				return err
			}
			forged.Annotations[deliveryv1alpha1.SpecAuthorAnnotation] = "ceo"
			return mallory.Update(ctx, &forged)
		})).To(Succeed())
		Expect(forged.Annotations).To(HaveKeyWithValue(deliveryv1alpha1.SpecAuthorAnnotation, "alice"), "the update's answer")
		Expect(author(ctx, ns, "checkout")).To(Equal("alice"))
		// ... so is its removal, by a merge patch.
		Expect(mallory.Patch(ctx, &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "checkout"}},
			client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"delivery.flagplane.dev/spec-author":null}}}`)))).To(Succeed())
		Expect(author(ctx, ns, "checkout")).To(Equal("alice"))
		expectHistory(ctx, ns, "checkout", rev(1, h1, "mallory", "argocd-controller", ""), rev(2, h2, "alice", "flagplane-rollback", ""))

		// A dry run of a change is answered with the user's name, and
		// writes nothing.
		dry := &v1beta1.FeatureFlag{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "checkout"}, dry)).To(Succeed())
		setValue(dry, "blue")
		Expect(as("bob", "kubectl-edit").Update(ctx, dry, client.DryRunAll)).To(Succeed())
		Expect(dry.Annotations).To(HaveKeyWithValue(deliveryv1alpha1.SpecAuthorAnnotation, "bob"))
		Expect(author(ctx, ns, "checkout")).To(Equal("alice"))
		Expect(served(ctx, ns, "checkout")).To(Equal(h2))
	})

	It("names the field manager of an edit made in the same second as the revision before", func(ctx SpecContext) {
		ns := newNamespace(ctx, "history-second")
		// managedFields have a resolution of a second: of two writes in
		// one, the one whose manager did not write the revision before is
		// the newer. By name order the other (bob-create) would be chosen:
		// only that rule names alice-edit. The spec is tried again, with
		// another FeatureFlag, until the two writes share a second, so
		// that it never passes on writes of two seconds.
		for attempt := 1; ; attempt++ {
			Expect(attempt).To(BeNumerically("<=", 5), "no two writes in one second in 5 attempts")
			name := fmt.Sprintf("checkout-%d", attempt)
			time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
			Expect(as("bob", "bob-create").Create(ctx, flagSet(ns, name, "red"))).To(Succeed())
			Eventually(func() []int64 { return numbers(revisions(ctx, ns, name)) }).WithPolling(10 * time.Millisecond).Should(Equal([]int64{1}))
			edit(ctx, as("alice", "alice-edit"), ns, name, func(ff *v1beta1.FeatureFlag) { setValue(ff, "green") })
			written := &v1beta1.FeatureFlag{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, written)).To(Succeed())
			seconds := map[string]int64{}
			for _, e := range written.ManagedFields {
				if e.Subresource == "" {
					seconds[e.Manager] = e.Time.Unix()
				}
			}
			GinkgoWriter.Printf("attempt %d: managedFields seconds %v\n", attempt, seconds)
			Eventually(func() []int64 { return numbers(revisions(ctx, ns, name)) }).Should(Equal([]int64{1, 2}))
			if seconds["bob-create"] != seconds["alice-edit"] {
				continue
			}
			second := revisions(ctx, ns, name)[1]
			Expect(second.Spec.FieldManager).To(Equal("alice-edit"))
			Expect(second.Spec.CreatedBy).To(Equal("alice"))
			break
		}
	})

	It("records no spec that flagd refuses", func(ctx SpecContext) {
		ns := newNamespace(ctx, "history-invalid")
		Expect(k8s.Create(ctx, flagSet(ns, "checkout", "red"))).To(Succeed())
		h1 := servedOtherThan(ctx, ns, "checkout", "")
		Eventually(func() []int64 { return numbers(revisions(ctx, ns, "checkout")) }).Should(Equal([]int64{1}))

		// A default variant the flag does not have: the API server takes
		// it (no webhook here), flagd would not load it.
		edit(ctx, k8s, ns, "checkout", func(ff *v1beta1.FeatureFlag) {
			f := ff.Spec.FlagSpec.Flags[flagKey]
			f.DefaultVariant = "missing"
			ff.Spec.FlagSpec.Flags[flagKey] = f
		})
		Eventually(func(g Gomega) {
			ff := &v1beta1.FeatureFlag{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "checkout"}, ff)).To(Succeed())
			g.Expect(meta.IsStatusConditionFalse(ff.Status.Conditions, v1beta1.ConditionAccepted)).To(BeTrue())
			g.Expect(ff.Status.ObservedGeneration).To(Equal(ff.Generation))
		}).Should(Succeed())
		// status.revision is the hash of what it would serve, not served.
		refused := served(ctx, ns, "checkout")
		Expect(refused).NotTo(Equal(h1))
		Consistently(func() []int64 { return numbers(revisions(ctx, ns, "checkout")) }).Should(Equal([]int64{1}))

		edit(ctx, k8s, ns, "checkout", func(ff *v1beta1.FeatureFlag) { setValue(ff, "blue") })
		h2 := servedOtherThan(ctx, ns, "checkout", refused)
		Eventually(func(g Gomega) {
			revs := revisions(ctx, ns, "checkout")
			g.Expect(numbers(revs)).To(Equal([]int64{1, 2}))
			g.Expect(revs[1].Spec.Revision).To(Equal(h2))
		}).Should(Succeed())
	})

	It("keeps the FeatureFlag's limit of revisions, and always the one it serves", func(ctx SpecContext) {
		ns := newNamespace(ctx, "history-prune")
		ff := flagSet(ns, "checkout", "v1")
		ff.Annotations = map[string]string{deliveryv1alpha1.RevisionHistoryLimitAnnotation: "2"}
		Expect(k8s.Create(ctx, ff)).To(Succeed())
		last := servedOtherThan(ctx, ns, "checkout", "")
		for _, v := range []string{"v2", "v3", "v4", "v5"} {
			edit(ctx, k8s, ns, "checkout", func(ff *v1beta1.FeatureFlag) { setValue(ff, v) })
			last = servedOtherThan(ctx, ns, "checkout", last)
			// Each edit recorded before the next (else one edit could pass
			// another unrecorded).
			Eventually(func() string {
				revs := revisions(ctx, ns, "checkout")
				return revs[len(revs)-1].Spec.Revision
			}).Should(Equal(last))
		}
		Eventually(func() []int64 { return numbers(revisions(ctx, ns, "checkout")) }).Should(Equal([]int64{4, 5}))

		// Limit 0 keeps the one it serves.
		edit(ctx, k8s, ns, "checkout", func(ff *v1beta1.FeatureFlag) {
			ff.Annotations[deliveryv1alpha1.RevisionHistoryLimitAnnotation] = "0"
		})
		Eventually(func() []int64 { return numbers(revisions(ctx, ns, "checkout")) }).Should(Equal([]int64{5}))
		Expect(revisions(ctx, ns, "checkout")[0].Spec.Revision).To(Equal(served(ctx, ns, "checkout")))

		// A limit that is no number: a Warning, and the manager's default.
		edit(ctx, k8s, ns, "checkout", func(ff *v1beta1.FeatureFlag) {
			ff.Annotations[deliveryv1alpha1.RevisionHistoryLimitAnnotation] = "many"
		})
		Eventually(func() []string { return warnings(ctx, ns, "checkout", history.EventInvalidHistoryLimit) }).Should(ContainElement(
			ContainSubstring(`revision-history-limit="many" is not a non-negative integer: keeping 10 revisions`)))
		edit(ctx, k8s, ns, "checkout", func(ff *v1beta1.FeatureFlag) { setValue(ff, "v6") })
		Eventually(func() []int64 { return numbers(revisions(ctx, ns, "checkout")) }).Should(Equal([]int64{5, 6}))

		// A limit above the most flagplane keeps: a Warning, and 100.
		edit(ctx, k8s, ns, "checkout", func(ff *v1beta1.FeatureFlag) {
			ff.Annotations[deliveryv1alpha1.RevisionHistoryLimitAnnotation] = "5000"
		})
		Eventually(func() []string { return warnings(ctx, ns, "checkout", history.EventInvalidHistoryLimit) }).Should(ContainElement(
			`annotation delivery.flagplane.dev/revision-history-limit="5000" is more than the 100 revisions flagplane keeps of a flag set: keeping 100`))
	})

	It("adopts the revisions a FeatureFlag deleted with --cascade=orphan left, and prunes them", func(ctx SpecContext) {
		ns := newNamespace(ctx, "history-orphan")
		editTo := func(v string) {
			GinkgoHelper()
			before := served(ctx, ns, "checkout")
			edit(ctx, k8s, ns, "checkout", func(ff *v1beta1.FeatureFlag) { setValue(ff, v) })
			now := servedOtherThan(ctx, ns, "checkout", before)
			// Recorded before the next edit.
			Eventually(func() string {
				revs := revisions(ctx, ns, "checkout")
				return revs[len(revs)-1].Spec.Revision
			}).Should(Equal(now))
		}
		create := func(v string) *v1beta1.FeatureFlag {
			GinkgoHelper()
			ff := flagSet(ns, "checkout", v)
			ff.Annotations = map[string]string{deliveryv1alpha1.RevisionHistoryLimitAnnotation: "3"}
			Expect(k8s.Create(ctx, ff)).To(Succeed())
			servedOtherThan(ctx, ns, "checkout", "")
			return ff
		}
		first := create("v1")
		Eventually(func() []int64 { return numbers(revisions(ctx, ns, "checkout")) }).Should(Equal([]int64{1}))
		editTo("v2")
		editTo("v3")
		Eventually(func() []int64 { return numbers(revisions(ctx, ns, "checkout")) }).Should(Equal([]int64{1, 2, 3}))

		_, err := cp.Kubectl("delete", "featureflag", "checkout", "-n", ns, "--cascade=orphan", "--wait=true")
		Expect(err).NotTo(HaveOccurred())
		// The garbage collector takes the FeatureFlag out of their
		// ownerReferences before the FeatureFlag goes.
		Eventually(func(g Gomega) {
			revs := revisions(ctx, ns, "checkout")
			g.Expect(numbers(revs)).To(Equal([]int64{1, 2, 3}))
			for _, r := range revs {
				g.Expect(r.OwnerReferences).To(BeEmpty(), r.Name)
			}
		}).Should(Succeed())

		second := create("v4")
		Expect(second.UID).NotTo(Equal(first.UID))
		editTo("v5")
		editTo("v6")
		expectOwned := func(g Gomega) []int64 {
			revs := revisions(ctx, ns, "checkout")
			for _, r := range revs {
				g.Expect(metav1.IsControlledBy(r, second)).To(BeTrue(), "%s is the new FeatureFlag's: none is left orphaned", r.Name)
			}
			return numbers(revs)
		}
		// Numbered after the orphans, which were adopted and pruned as
		// the oldest: at most 3 remain.
		Eventually(expectOwned).Should(Equal([]int64{4, 5, 6}))
		Consistently(expectOwned).Should(Equal([]int64{4, 5, 6}))
	})

	It("records nothing in a namespace at --revision-namespace-limit, says so, and serves the FeatureFlag all the same", func(ctx SpecContext) {
		ns := newNamespace(ctx, "history-bound")
		// The namespace's bound, filled by revisions of another flag set
		// (no FeatureFlag of that name: nobody prunes them).
		others := make([]*deliveryv1alpha1.FeatureFlagRevision, namespaceLimit)
		for i := range others {
			r := history.Desired(flagSet(ns, "other", fmt.Sprint(i)), fmt.Sprintf("%032x", i+1), int64(i+1), "", true)
			r.OwnerReferences = nil
			Expect(k8s.Create(ctx, r)).To(Succeed())
			others[i] = r
		}

		Expect(k8s.Create(ctx, flagSet(ns, "checkout", "red"))).To(Succeed())
		h1 := servedOtherThan(ctx, ns, "checkout", "")
		Eventually(func() []string { return warnings(ctx, ns, "checkout", history.EventRevisionNotRecorded) }).Should(ConsistOf(
			fmt.Sprintf("namespace %s holds %d FeatureFlagRevisions, the manager's --revision-namespace-limit: the spec flagplane accepted "+
				"and serves is not recorded in the history of FeatureFlag checkout (lower the revision-history-limit of FeatureFlags of the "+
				"namespace, or delete FeatureFlags or revisions)", ns, namespaceLimit)))
		Eventually(func(g Gomega) {
			ff := getFlagSet(ctx, g, ns, "checkout")
			c := meta.FindStatusCondition(ff.Status.Conditions, deliveryv1alpha1.ConditionRevisionRecorded)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(deliveryv1alpha1.ReasonNamespaceRevisionLimit))
			g.Expect(meta.IsStatusConditionTrue(ff.Status.Conditions, v1beta1.ConditionReady)).To(BeTrue(), "served all the same")
		}).Should(Succeed())
		Expect(revisions(ctx, ns, "checkout")).To(BeEmpty())
		Expect(served(ctx, ns, "checkout")).To(Equal(h1))
		r, err := flagplanecli.Run(flagplaneBin, cp.KubeconfigPath, "history", "ff/checkout", "-n", ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Stdout).To(Equal(fmt.Sprintf("FeatureFlag %s/checkout has no recorded revisions\n"+
			"status.revision %s is served, and not recorded (NamespaceRevisionLimit): namespace %s holds %d FeatureFlagRevisions, "+
			"the manager's --revision-namespace-limit: the spec flagplane accepted and serves is not recorded in the history of "+
			"FeatureFlag checkout (lower the revision-history-limit of FeatureFlags of the namespace, or delete FeatureFlags or revisions)\n",
			ns, short(h1), ns, namespaceLimit)))

		// A revision of the namespace deleted makes room: the spec is
		// recorded (the deletion wakes the FeatureFlag up), and the
		// condition goes.
		Expect(k8s.Delete(ctx, others[0])).To(Succeed())
		Eventually(func() []int64 { return numbers(revisions(ctx, ns, "checkout")) }).Should(Equal([]int64{1}))
		Expect(revisions(ctx, ns, "checkout")[0].Spec.Revision).To(Equal(h1))
		Eventually(func(g Gomega) {
			ff := getFlagSet(ctx, g, ns, "checkout")
			g.Expect(meta.FindStatusCondition(ff.Status.Conditions, deliveryv1alpha1.ConditionRevisionRecorded)).To(BeNil())
		}).Should(Succeed())
	})

	It("backs off from a ResourceQuota's refusal, says it once, and records once the quota allows", func(ctx SpecContext) {
		ns := newNamespace(ctx, "history-quota")
		const counted = "count/featureflagrevisions.delivery.flagplane.dev"
		quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "revisions"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{counted: resource.MustParse("2")}}}
		Expect(k8s.Create(ctx, quota)).To(Succeed())
		// The quota controller has computed its usage: the API server's
		// quota admission counts from there.
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(quota), quota)).To(Succeed())
			g.Expect(quota.Status.Hard).To(HaveKey(corev1.ResourceName(counted)))
			g.Expect(quota.Status.Used).To(HaveKey(corev1.ResourceName(counted)))
		}).Should(Succeed())

		Expect(k8s.Create(ctx, flagSet(ns, "checkout", "v1"))).To(Succeed())
		last := servedOtherThan(ctx, ns, "checkout", "")
		Eventually(func() []int64 { return numbers(revisions(ctx, ns, "checkout")) }).Should(Equal([]int64{1}))
		edit(ctx, k8s, ns, "checkout", func(ff *v1beta1.FeatureFlag) { setValue(ff, "v2") })
		last = servedOtherThan(ctx, ns, "checkout", last)
		Eventually(func() []int64 { return numbers(revisions(ctx, ns, "checkout")) }).Should(Equal([]int64{1, 2}))

		// The third is refused by the API server: 403, exceeded quota.
		edit(ctx, k8s, ns, "checkout", func(ff *v1beta1.FeatureFlag) { setValue(ff, "v3") })
		h3 := servedOtherThan(ctx, ns, "checkout", last)
		Eventually(func() []string { return warnings(ctx, ns, "checkout", history.EventRevisionNotRecorded) }).Should(ConsistOf(And(
			HavePrefix("FeatureFlagRevision "+ns+"/checkout-3 not written: the API server refused it (Forbidden): "),
			ContainSubstring("exceeded quota: revisions"))))
		Eventually(func(g Gomega) {
			ff := getFlagSet(ctx, g, ns, "checkout")
			c := meta.FindStatusCondition(ff.Status.Conditions, deliveryv1alpha1.ConditionRevisionRecorded)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(deliveryv1alpha1.ReasonRevisionRefused))
			g.Expect(c.Message).To(ContainSubstring("exceeded quota: revisions"))
			g.Expect(meta.IsStatusConditionTrue(ff.Status.Conditions, v1beta1.ConditionReady)).To(BeTrue(), "served all the same")
			g.Expect(ff.Status.Revision).To(Equal(h3))
		}).Should(Succeed())
		// Retried 2 s and 4 s later, refused each time: still one Event,
		// never repeated (an Event sent again would grow a series).
		Consistently(func(g Gomega) {
			var events eventsv1.EventList
			g.Expect(k8s.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
			var notRecorded []eventsv1.Event
			for _, e := range events.Items {
				if e.Reason == history.EventRevisionNotRecorded {
					notRecorded = append(notRecorded, e)
				}
			}
			g.Expect(notRecorded).To(HaveLen(1))
			g.Expect(notRecorded[0].Series).To(BeNil())
		}).WithTimeout(7 * time.Second).Should(Succeed())
		Expect(numbers(revisions(ctx, ns, "checkout"))).To(Equal([]int64{1, 2}))

		// The quota raised: recorded at the next try (8 s after the last).
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(quota), quota)).To(Succeed())
		quota.Spec.Hard[counted] = resource.MustParse("5")
		Expect(k8s.Update(ctx, quota)).To(Succeed())
		Eventually(func() []int64 { return numbers(revisions(ctx, ns, "checkout")) }).Should(Equal([]int64{1, 2, 3}))
		Expect(revisions(ctx, ns, "checkout")[2].Spec.Revision).To(Equal(h3))
		Eventually(func(g Gomega) {
			ff := getFlagSet(ctx, g, ns, "checkout")
			g.Expect(meta.FindStatusCondition(ff.Status.Conditions, deliveryv1alpha1.ConditionRevisionRecorded)).To(BeNil())
		}).Should(Succeed())
	})

	It("records a revision of a flag set near etcd's 1.5 MiB, and tells of one etcd refuses", func(ctx SpecContext) {
		// The largest FeatureFlag the API server stores, to the flag, with
		// real creates (a dry run does not reach etcd, whose request limit
		// of 1.5 MiB is the bound).
		probe := newNamespace(ctx, "history-probe")
		stored := bigflagset.FlagSet(probe, "stored", 17_000)
		Expect(bigflagset.Create(ctx, k8s, stored)).To(Succeed(), "the search starts from a size stored")
		search, err := bigflagset.LargestStored(ctx, k8s, stored)
		Expect(err).NotTo(HaveOccurred())
		lo, refusal := search.Largest, search.Refusal

		// A revision holds the spec and a few hundred bytes of its own
		// (its labels, owner, number, hash, author) more than the
		// FeatureFlag holds without status: the largest FeatureFlag's is
		// refused by etcd, and told; 10 flags fewer (about 900 bytes), it
		// is stored.
		ns := newNamespace(ctx, "history-large")
		Expect(bigflagset.Create(ctx, k8s, bigflagset.FlagSet(ns, "largest", lo))).To(Succeed())
		Eventually(func() []string { return warnings(ctx, ns, "largest", history.EventRevisionNotRecorded) }).WithTimeout(time.Minute).Should(ConsistOf(
			"FeatureFlagRevision " + ns + "/largest-1 not written: the API server refused it (HTTP 500): etcdserver: request is too large"))
		Expect(revisions(ctx, ns, "largest")).To(BeEmpty())
		// Nor does its status fit: the object with a status passes etcd's
		// limit (the status workflow's writes are refused), so the Event
		// is all that tells of the revision there.
		Consistently(func() string { return served(ctx, ns, "largest") }).Should(BeEmpty())

		Expect(bigflagset.Create(ctx, k8s, bigflagset.FlagSet(ns, "large", lo-10))).To(Succeed())
		Eventually(func() []int64 { return numbers(revisions(ctx, ns, "large")) }).WithTimeout(time.Minute).Should(Equal([]int64{1}))
		recorded := revisions(ctx, ns, "large")[0]
		Expect(recorded.Spec.FlagSpec.Flags).To(HaveLen(lo - 10))
		size, err := json.Marshal(recorded)
		Expect(err).NotTo(HaveOccurred())
		Expect(len(size)).To(BeNumerically(">", 1_500_000))
		AddReportEntry("largest FeatureFlag stored, and revisions", fmt.Sprintf(
			"%d flags stored (one more: %s; found with %d creates from a prediction of %d); its revision refused; %d flags: a revision of %d bytes as read back",
			lo, refusal, search.Creates, search.Predicted, lo-10, len(size)))
		GinkgoWriter.Printf("largest FeatureFlag stored: %d flags; revision of %d flags: %d bytes\n", lo, lo-10, len(size))
		Expect(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probe}})).To(Succeed())
	})

	It("is immutable, and goes with its FeatureFlag", func(ctx SpecContext) {
		ns := newNamespace(ctx, "history-gc")
		ff := flagSet(ns, "checkout", "red")
		Expect(k8s.Create(ctx, ff)).To(Succeed())
		Eventually(func() []int64 { return numbers(revisions(ctx, ns, "checkout")) }).Should(Equal([]int64{1}))

		r := revisions(ctx, ns, "checkout")[0]
		r.Spec.ChangeCause = "rewriting history"
		err := k8s.Update(ctx, r)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err).To(MatchError(ContainSubstring("a FeatureFlagRevision is immutable: its spec cannot change")))

		// The test control plane runs the garbage collector.
		Expect(k8s.Delete(ctx, ff)).To(Succeed())
		Eventually(func() []*deliveryv1alpha1.FeatureFlagRevision { return revisions(ctx, ns, "checkout") }).Should(BeEmpty())
	})

	It("lists, prints, compares and rolls back revisions from the command line", func(ctx SpecContext) {
		ns := newNamespace(ctx, "history-cli")
		cli := func(args ...string) flagplanecli.Result {
			GinkgoHelper()
			r, err := flagplanecli.Run(flagplaneBin, cp.KubeconfigPath, append(args, "-n", ns)...)
			Expect(err).NotTo(HaveOccurred())
			GinkgoWriter.Printf("$ flagplane %s -n %s\n%s%s(exit %d)\n", strings.Join(args, " "), ns, r.Stdout, r.Stderr, r.ExitCode)
			return r
		}
		r := cli("history", "ff/checkout")
		Expect(r.ExitCode).To(Equal(1))
		Expect(r.Stderr).To(ContainSubstring("FeatureFlag " + ns + "/checkout not found"))

		ff := flagSet(ns, "checkout", "red")
		Expect(as("bob", "bob-create").Create(ctx, ff)).To(Succeed())
		h1 := servedOtherThan(ctx, ns, "checkout", "")
		Eventually(func() []int64 { return numbers(revisions(ctx, ns, "checkout")) }).Should(Equal([]int64{1}))
		edit(ctx, as("alice", "alice-edit"), ns, "checkout", func(ff *v1beta1.FeatureFlag) {
			setValue(ff, "green")
			ff.Annotations = map[string]string{deliveryv1alpha1.ChangeCauseAnnotation: "greener"}
		})
		h2 := servedOtherThan(ctx, ns, "checkout", h1)
		Eventually(func() []int64 { return numbers(revisions(ctx, ns, "checkout")) }).Should(Equal([]int64{1, 2}))

		r = cli("history", "ff/checkout")
		Expect(r.ExitCode).To(Equal(0))
		lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		Expect(lines).To(HaveLen(4))
		Expect(strings.Fields(lines[0])).To(Equal([]string{"NUMBER", "REVISION", "AGE", "BY", "CAUSE"}))
		Expect(strings.Fields(lines[1])).To(And(HaveLen(4), HaveExactElements("1", short(h1), Not(BeEmpty()), "bob")))
		Expect(strings.Fields(lines[2])).To(And(HaveLen(5), HaveExactElements("2*", short(h2), Not(BeEmpty()), "alice", "greener")))
		Expect(lines[3]).To(Equal("* serves now (status.revision " + short(h2) + ")"))
		r = cli("history", "ff/checkout", "-o", "wide")
		Expect(r.ExitCode).To(Equal(0))
		lines = strings.Split(strings.TrimSpace(r.Stdout), "\n")
		Expect(lines[0]).To(MatchRegexp(`^NUMBER\s+REVISION\s+AGE\s+BY\s+FIELD MANAGER\s+CAUSE$`))
		Expect(strings.Fields(lines[1])).To(HaveExactElements("1", short(h1), Not(BeEmpty()), "bob", "bob-create"))
		Expect(strings.Fields(lines[2])).To(HaveExactElements("2*", short(h2), Not(BeEmpty()), "alice", "alice-edit", "greener"))

		r = cli("history", "featureflag/checkout", "--revision", "1", "-o", "json")
		Expect(r.ExitCode).To(Equal(0))
		want, err := json.Marshal(ff.Spec.FlagSpec)
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Stdout).To(MatchJSON(want))
		r = cli("history", "ff/checkout", "--revision", "1")
		Expect(r.Stdout).To(ContainSubstring(`current: red`))

		// What going back changes, evaluated as flagd does.
		contexts := filepath.Join(GinkgoT().TempDir(), "contexts.yaml")
		Expect(os.WriteFile(contexts, []byte("- name: anyone\n  context: {targetingKey: user-1}\n"), 0o600)).To(Succeed())
		r = cli("diff", "ff/checkout", "--revisions", "current..1", "--contexts", contexts)
		Expect(r.ExitCode).To(Equal(0), r.Stderr)
		Expect(r.Stdout).To(ContainSubstring("FeatureFlag " + ns + "/checkout, revision current to 1"))
		Expect(r.Stdout).To(MatchRegexp(`anyone: 1 flag changes\n\s+- ` + flagKey + `: .*"green".*"red"`))
		r = cli("diff", "ff/checkout", "--revisions", "2..current", "--contexts", contexts)
		Expect(r.Stdout).To(ContainSubstring("anyone: no flag changes"))

		// Errors say what there is.
		r = cli("rollback", "ff/checkout", "--to-revision", "9")
		Expect(r.ExitCode).To(Equal(1))
		Expect(r.Stderr).To(ContainSubstring("FeatureFlag " + ns + "/checkout has no revision 9: it has 1, 2"))

		r = cli("rollback", "ff/checkout", "--to-revision", "1", "--dry-run")
		Expect(r.ExitCode).To(Equal(0), r.Stderr)
		Expect(r.Stdout).To(ContainSubstring("would roll back (dry run: nothing written) to revision 1 (" + short(h1) + ")"))
		Expect(r.Stdout).To(ContainSubstring("flag " + flagKey + ": variants changed"))
		Consistently(func() string { return served(ctx, ns, "checkout") }).Should(Equal(h2), "a dry run writes nothing")

		r = cli("rollback", "ff/checkout", "--to-revision", "1")
		Expect(r.ExitCode).To(Equal(0), r.Stderr)
		Expect(r.Stdout).To(ContainSubstring("rolled back to revision 1 (" + short(h1) + ")"))
		Eventually(func() string { return served(ctx, ns, "checkout") }).Should(Equal(h1))
		// The command runs as the kubeconfig's user, and names its tool.
		admin := whoami(ctx)
		expectHistory(ctx, ns, "checkout", rev(1, h1, "bob", "bob-create", ""), rev(2, h2, "alice", "alice-edit", "greener"),
			rev(3, h1, admin, "flagplane-rollback", "rollback to revision 1"))

		r = cli("rollback", "ff/checkout", "--to-revision", "3")
		Expect(r.ExitCode).To(Equal(0), r.Stderr)
		Expect(r.Stdout).To(ContainSubstring("already has the spec of revision 3 (" + short(h1) + "): nothing to roll back"))

		r = cli("history", "ff/checkout")
		Expect(r.Stdout).To(MatchRegexp(`(?m)^3\*\s+` + short(h1) + `\s+\S+\s+` + regexp.QuoteMeta(admin) + `\s+rollback to revision 1$`))
	})
})
