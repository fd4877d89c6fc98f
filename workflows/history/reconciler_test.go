package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

// world is a FeatureFlag shop/flags as the cache and the graph hold it, and
// a reconciler on a fake cluster.
type world struct {
	t    *testing.T
	topo *topology.Topology
	c    client.Client
	r    *Reconciler
	ff   *v1beta1.FeatureFlag
	// writers are the FeatureFlag's managedFields as the graph gets them
	// (the fake cluster keeps its own).
	writers []metav1.ManagedFieldsEntry
}

func newWorld(t *testing.T, funcs *interceptor.Funcs, objs ...client.Object) *world {
	t.Helper()
	s := runtime.NewScheme()
	if err := v1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := deliveryv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flags", UID: "ff-uid",
		Annotations: map[string]string{deliveryv1alpha1.SpecAuthorAnnotation: "bob"}}}
	setFlag(ff, "on")
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(append(objs, ff)...).
		WithIndex(&deliveryv1alpha1.FeatureFlagRevision{}, FlagSetIndex, func(o client.Object) []string {
			return []string{o.(*deliveryv1alpha1.FeatureFlagRevision).Spec.FlagSet}
		})
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	w := &world{t: t, topo: topology.New(flagsets.NewValidator(false).TopologyOptions()...), c: b.Build(),
		writers: []metav1.ManagedFieldsEntry{{Manager: "zz-create", Operation: metav1.ManagedFieldsOperationUpdate, Time: &metav1.Time{Time: time.Unix(100, 0)}}}}
	w.r = &Reconciler{Client: w.c, Graph: w.topo, DefaultLimit: DefaultLimit, TrustSpecAuthor: true}
	w.sync()
	return w
}

// setFlag gives ff one flag f whose default variant is variant ("on",
// "off"; anything else is a variant that does not exist: invalid).
func setFlag(ff *v1beta1.FeatureFlag, variant string) {
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{"f": {State: v1beta1.FlagStateEnabled, DefaultVariant: variant,
		Variants: json.RawMessage(`{"on":true,"off":false}`)}}
}

// sync hands the cluster's FeatureFlag to the graph, as the informer does.
func (w *world) sync() {
	w.t.Helper()
	ff := &v1beta1.FeatureFlag{}
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: "shop", Name: "flags"}, ff); err != nil {
		w.t.Fatal(err)
	}
	ff.ManagedFields = w.writers
	if _, err := w.topo.UpsertFlagSet(ff); err != nil {
		w.t.Fatal(err)
	}
	w.ff = ff
}

// edit changes the FeatureFlag in the cluster (not yet in the graph).
func (w *world) edit(change func(ff *v1beta1.FeatureFlag)) {
	w.t.Helper()
	ff := w.ff.DeepCopy()
	ff.ManagedFields = nil
	change(ff)
	if err := w.c.Update(context.Background(), ff); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) reconcile() (reconcile.Result, error) {
	return w.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "flags"}})
}

func (w *world) revisions() []*deliveryv1alpha1.FeatureFlagRevision {
	w.t.Helper()
	revs, err := List(context.Background(), w.c, "shop", "flags")
	if err != nil {
		w.t.Fatal(err)
	}
	return revs
}

func (w *world) served() string {
	r, _ := w.topo.Snapshot().FlagSetRendered(topology.FlagSetKey("shop", "flags"))
	return r.Revision
}

// TestReconcileRecords: the first reconcile records revision 1 with the
// served hash, its author and cause; again, nothing; an edit the graph has
// not taken waits for it; an accepted edit is revision 2; an invalid one is
// none; going back is revision 3 with revision 1's hash.
func TestReconcileRecords(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t, nil)
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	revs := w.revisions()
	g.Expect(revs).To(HaveLen(1))
	first := revs[0]
	g.Expect(first.Name).To(Equal("flags-1"))
	g.Expect(first.Labels).To(Equal(map[string]string{deliveryv1alpha1.FlagSetLabel: "flags"}))
	g.Expect(metav1.IsControlledBy(first, w.ff)).To(BeTrue())
	g.Expect(first.Spec).To(Equal(deliveryv1alpha1.FeatureFlagRevisionSpec{FlagSet: "flags", Number: 1, Revision: w.served(),
		FlagSpec: w.ff.Spec.FlagSpec, CreatedBy: "bob", FieldManager: "zz-create"}))
	hash1 := first.Spec.Revision
	g.Expect(hash1).NotTo(BeEmpty())

	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	g.Expect(w.revisions()).To(HaveLen(1), "the same spec again records nothing")

	w.edit(func(ff *v1beta1.FeatureFlag) {
		setFlag(ff, "off")
		ff.Annotations = map[string]string{deliveryv1alpha1.ChangeCauseAnnotation: "turn f off", deliveryv1alpha1.SpecAuthorAnnotation: "alice"}
	})
	// In the same second as the create: alice-edit is not the field
	// manager of revision 1, so the newest write is hers.
	w.writers = append(w.writers, metav1.ManagedFieldsEntry{Manager: "alice-edit", Operation: metav1.ManagedFieldsOperationUpdate, Time: &metav1.Time{Time: time.Unix(100, 0)}})
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}), "the graph has not taken the edit yet: its Delta brings the FeatureFlag back")
	g.Expect(w.revisions()).To(HaveLen(1))
	w.sync()
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	revs = w.revisions()
	g.Expect(revs).To(HaveLen(2))
	g.Expect(revs[1].Name).To(Equal("flags-2"))
	g.Expect(revs[1].Spec.Revision).To(Equal(w.served()))
	g.Expect(revs[1].Spec.Revision).NotTo(Equal(hash1))
	g.Expect(revs[1].Spec.CreatedBy).To(Equal("alice"))
	g.Expect(revs[1].Spec.FieldManager).To(Equal("alice-edit"))
	g.Expect(revs[1].Spec.ChangeCause).To(Equal("turn f off"))

	w.edit(func(ff *v1beta1.FeatureFlag) { setFlag(ff, "missing") })
	w.sync()
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	g.Expect(w.revisions()).To(HaveLen(2), "an invalid spec is not recorded")

	w.edit(func(ff *v1beta1.FeatureFlag) { setFlag(ff, "on") })
	w.sync()
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	revs = w.revisions()
	g.Expect(revs).To(HaveLen(3))
	g.Expect(revs[2].Spec.Number).To(Equal(int64(3)))
	g.Expect(revs[2].Spec.Revision).To(Equal(hash1), "a spec applied again gets a new number")
}

// TestReconcileAlreadyExists: a create that finds its revision made (a
// retry, a racing reconcile) is success; one that finds another revision
// under the name waits for the cache.
func TestReconcileAlreadyExists(t *testing.T) {
	g := NewWithT(t)
	var existing *deliveryv1alpha1.FeatureFlagRevision
	funcs := &interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if rev, ok := obj.(*deliveryv1alpha1.FeatureFlagRevision); ok && existing != nil {
			// Someone made it first: it is in the cluster (and the cache).
			if err := c.Create(ctx, existing); err != nil {
				return err
			}
			existing = nil
			return apierrors.NewAlreadyExists(deliveryv1alpha1.GroupVersion.WithResource("featureflagrevisions").GroupResource(), rev.Name)
		}
		return c.Create(ctx, obj, opts...)
	}}
	w := newWorld(t, funcs)
	existing = Desired(w.ff, w.served(), 1, "", true)
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	g.Expect(w.revisions()).To(HaveLen(1))

	// Another hash under the next name: not this spec's revision.
	w.edit(func(ff *v1beta1.FeatureFlag) { setFlag(ff, "off") })
	w.sync()
	existing = Desired(w.ff, "another-hash", 2, "", true)
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{RequeueAfter: cacheBehindDelay}))
	// Then the cache holds it: the spec is recorded as 3.
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	revs := w.revisions()
	g.Expect(numbers(revs)).To(Equal([]int64{1, 2, 3}))
	g.Expect(revs[2].Spec.Revision).To(Equal(w.served()))
}

// TestReconcileWaitsForItsOwnCreate: a reconcile whose cache does not list
// the revision the one before created yet waits for it rather than create
// it again; once the cache lists it, the next edit is recorded.
func TestReconcileWaitsForItsOwnCreate(t *testing.T) {
	g := NewWithT(t)
	creates, behind := 0, true
	funcs := &interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*deliveryv1alpha1.FeatureFlagRevision); ok {
				creates++
			}
			return c.Create(ctx, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			if revs, ok := list.(*deliveryv1alpha1.FeatureFlagRevisionList); ok && behind {
				// The cache has not seen the create yet.
				revs.Items = nil
			}
			return nil
		},
	}
	w := newWorld(t, funcs)
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	g.Expect(creates).To(Equal(1))
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{RequeueAfter: cacheBehindDelay}), "the cache is behind its own create")
	g.Expect(creates).To(Equal(1), "no second create of the same revision")

	behind = false
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	g.Expect(creates).To(Equal(1))
	w.edit(func(ff *v1beta1.FeatureFlag) { setFlag(ff, "off") })
	w.sync()
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	g.Expect(creates).To(Equal(2))
	g.Expect(numbers(w.revisions())).To(Equal([]int64{1, 2}))
}

// TestReconcilePrunes: the history is cut to the annotation's limit, the
// oldest first, but the revision served and those a rollout policy names
// stay; an invalid limit keeps the default's.
func TestReconcilePrunes(t *testing.T) {
	g := NewWithT(t)
	policy := &deliveryv1alpha1.FeatureFlagRolloutPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "staged"},
		Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{TargetRef: deliveryv1alpha1.FlagSetTargetReference{
			Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind, Name: "flags"}}}
	w := newWorld(t, nil, policy)
	hashes := []string{}
	for _, v := range []string{"on", "off", "on", "off", "on"} {
		w.edit(func(ff *v1beta1.FeatureFlag) { setFlag(ff, v) })
		w.sync()
		g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
		hashes = append(hashes, w.served())
	}
	g.Expect(numbers(w.revisions())).To(Equal([]int64{1, 2, 3, 4, 5}), "the first edit left the spec as it was")

	// Revision 2's hash (off) is a rollout's stable revision.
	policy.Status.StableRevision = hashes[1]
	g.Expect(w.c.Update(context.Background(), policy)).To(Succeed())
	w.edit(func(ff *v1beta1.FeatureFlag) {
		ff.Annotations = map[string]string{deliveryv1alpha1.RevisionHistoryLimitAnnotation: "2"}
	})
	w.sync()
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	// 5 is served ("on"), 4 is the newest "off", which the policy names.
	g.Expect(numbers(w.revisions())).To(Equal([]int64{4, 5}))

	w.edit(func(ff *v1beta1.FeatureFlag) {
		ff.Annotations = map[string]string{deliveryv1alpha1.RevisionHistoryLimitAnnotation: "0"}
	})
	w.sync()
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	g.Expect(numbers(w.revisions())).To(Equal([]int64{4, 5}), "limit 0 keeps what is served and named")
	policy.Status.StableRevision = ""
	g.Expect(w.c.Update(context.Background(), policy)).To(Succeed())
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	g.Expect(numbers(w.revisions())).To(Equal([]int64{5}))

	// An invalid limit: the default's 10, and one warning per value.
	w.edit(func(ff *v1beta1.FeatureFlag) {
		ff.Annotations = map[string]string{deliveryv1alpha1.RevisionHistoryLimitAnnotation: "many"}
	})
	w.sync()
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	value, warned := w.r.warned.Load(types.NamespacedName{Namespace: "shop", Name: "flags"})
	g.Expect(warned).To(BeTrue())
	g.Expect(value).To(Equal("many"))
}

// TestReconcileLegacyRevision: a revision recorded before revisions had
// 128 bits holds the first 12 hex digits of its content's hash. The same
// content is no new revision (before, every flag set got a duplicate of
// its newest revision after the upgrade); an edit is the next one.
func TestReconcileLegacyRevision(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t, nil)
	full := w.served()
	g.Expect(full).To(HaveLen(32))
	legacy := Desired(w.ff, topology.ShortRevision(full), 1, "", true)
	g.Expect(topology.IsLegacyRevision(legacy.Spec.Revision)).To(BeTrue())
	g.Expect(w.c.Create(context.Background(), legacy)).To(Succeed())

	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	revs := w.revisions()
	g.Expect(numbers(revs)).To(Equal([]int64{1}), "the legacy revision of the same content is the newest")
	g.Expect(revs[0].Spec.Revision).To(Equal(topology.ShortRevision(full)))

	w.edit(func(ff *v1beta1.FeatureFlag) { setFlag(ff, "off") })
	w.sync()
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	g.Expect(numbers(w.revisions())).To(Equal([]int64{1, 2}))

	// Back to the first content with a limit of 1: the legacy revision 1
	// is not the newest of its content any more, 3 is.
	w.edit(func(ff *v1beta1.FeatureFlag) {
		setFlag(ff, "on")
		ff.Annotations = map[string]string{deliveryv1alpha1.RevisionHistoryLimitAnnotation: "1"}
	})
	w.sync()
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	revs = w.revisions()
	g.Expect(numbers(revs)).To(Equal([]int64{3}))
	g.Expect(revs[0].Spec.Revision).To(Equal(full))
}

// TestReconcileKeepsTheLegacyRevisionARolloutNames: a rollout policy whose
// status names a legacy (12-digit) revision keeps the full revision of that
// content, and the other way round.
func TestReconcileKeepsTheLegacyRevisionARolloutNames(t *testing.T) {
	g := NewWithT(t)
	policy := &deliveryv1alpha1.FeatureFlagRolloutPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "staged"},
		Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{TargetRef: deliveryv1alpha1.FlagSetTargetReference{
			Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind, Name: "flags"}}}
	w := newWorld(t, nil, policy)
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	first := w.served()
	w.edit(func(ff *v1beta1.FeatureFlag) { setFlag(ff, "off") })
	w.sync()
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	g.Expect(numbers(w.revisions())).To(Equal([]int64{1, 2}))

	policy.Status.StableRevision = topology.ShortRevision(first)
	g.Expect(w.c.Update(context.Background(), policy)).To(Succeed())
	w.edit(func(ff *v1beta1.FeatureFlag) {
		ff.Annotations = map[string]string{deliveryv1alpha1.RevisionHistoryLimitAnnotation: "0"}
	})
	w.sync()
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	g.Expect(numbers(w.revisions())).To(Equal([]int64{1, 2}), "revision 1 is the full form of the stable revision the policy names")
}

// TestReconcileCapsTheLimit: an annotation above MaxLimit keeps MaxLimit
// revisions, with one warning for the value.
func TestReconcileCapsTheLimit(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t, nil)
	// 102 revisions of other contents, then the one served.
	for n := int64(1); n <= 102; n++ {
		g.Expect(w.c.Create(context.Background(), Desired(w.ff, fmt.Sprintf("%032x", n), n, "", true))).To(Succeed())
	}
	w.edit(func(ff *v1beta1.FeatureFlag) {
		ff.Annotations = map[string]string{deliveryv1alpha1.RevisionHistoryLimitAnnotation: "500"}
	})
	w.sync()
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	revs := w.revisions()
	g.Expect(revs).To(HaveLen(MaxLimit))
	g.Expect(revs[0].Spec.Number).To(Equal(int64(104 - MaxLimit)))
	g.Expect(revs[len(revs)-1].Spec.Revision).To(Equal(w.served()))
	value, warned := w.r.warned.Load(types.NamespacedName{Namespace: "shop", Name: "flags"})
	g.Expect(warned).To(BeTrue())
	g.Expect(value).To(Equal("500"))
}

// recorded is revision number of the flag set with one flag f whose
// default variant is variant, holding what it claims, controlled by owner
// ("" for none: left by a FeatureFlag deleted with --cascade=orphan).
func recorded(t *testing.T, variant string, number int64, owner types.UID) *deliveryv1alpha1.FeatureFlagRevision {
	t.Helper()
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flags", UID: owner}}
	setFlag(ff, variant)
	content, err := flagsets.Render(ff)
	if err != nil {
		t.Fatal(err)
	}
	r := Desired(ff, flagsets.Revision(content), number, "", true)
	if owner == "" {
		r.OwnerReferences = nil
	}
	return r
}

// TestReconcileAdoptsOrphans: revisions of the flag set without a
// controller (a FeatureFlag deleted with --cascade=orphan, then created
// again) become the new FeatureFlag's, count toward its limit and are
// pruned like the rest; one whose content is not what it claims is not
// adopted, and one an earlier FeatureFlag still controls is left to the
// garbage collector. Both take numbers.
func TestReconcileAdoptsOrphans(t *testing.T) {
	g := NewWithT(t)
	forged := recorded(t, "off", 5, "")
	forged.Spec.FlagSpec = recorded(t, "on", 5, "").Spec.FlagSpec
	w := newWorld(t, nil,
		recorded(t, "off", 1, ""), recorded(t, "on", 2, ""), recorded(t, "off", 3, ""), recorded(t, "on", 4, ""),
		forged, recorded(t, "off", 6, "old-uid"))
	w.edit(func(ff *v1beta1.FeatureFlag) {
		setFlag(ff, "off")
		ff.Annotations = map[string]string{deliveryv1alpha1.RevisionHistoryLimitAnnotation: "3"}
	})
	w.sync()
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))

	ours, others := []int64{}, []int64{}
	for _, r := range w.revisions() {
		if metav1.IsControlledBy(r, w.ff) {
			ours = append(ours, r.Spec.Number)
		} else {
			others = append(others, r.Spec.Number)
		}
	}
	g.Expect(ours).To(Equal([]int64{3, 4, 7}), "1 to 4 adopted, 7 recorded, the oldest pruned to the limit")
	g.Expect(others).To(Equal([]int64{5, 6}), "the forgery and the earlier FeatureFlag's are not this one's")
	newest := w.revisions()[len(w.revisions())-1]
	g.Expect(newest.Spec.Revision).To(Equal(w.served()))
}

// TestReconcilePassesOverANameOfAnotherFlagSet: a revision of another flag
// set under the name of the next number (written by hand) is passed over,
// not waited for.
func TestReconcilePassesOverANameOfAnotherFlagSet(t *testing.T) {
	g := NewWithT(t)
	squatter := recorded(t, "off", 1, "other-uid")
	squatter.Spec.FlagSet = "other"
	w := newWorld(t, nil, squatter)
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	revs := w.revisions()
	g.Expect(numbers(revs)).To(Equal([]int64{2}))
	g.Expect(revs[0].Name).To(Equal("flags-2"))
	g.Expect(metav1.IsControlledBy(revs[0], w.ff)).To(BeTrue())
}

// otherRevisions are n revisions of another flag set of the namespace.
func otherRevisions(t *testing.T, n int) []client.Object {
	t.Helper()
	var out []client.Object
	for i := 1; i <= n; i++ {
		r := recorded(t, "on", int64(i), "other-uid")
		r.Spec.FlagSet, r.Name = "other", RevisionName("other", int64(i))
		out = append(out, r)
	}
	return out
}

// drain returns the Events a FakeRecorder holds.
func drain(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// TestReconcileNamespaceLimit: in a namespace that holds NamespaceLimit
// revisions, a revision that would add one is not recorded: the
// FeatureFlag's problem is remembered (for its status), told by one
// Warning Event, and tried again later, twice as late each time. A flag
// set whose history is full still records: it deletes its oldest first,
// and the namespace does not grow. Room made, it records, and the problem
// is gone.
func TestReconcileNamespaceLimit(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t, nil, otherRevisions(t, 3)...)
	rec := events.NewFakeRecorder(10)
	unrecorded := &workflows.UnrecordedRevisions{}
	var changed []topology.Key
	unrecorded.OnChange(func(k topology.Key) { changed = append(changed, k) })
	w.r.Events, w.r.NamespaceLimit, w.r.Unrecorded = rec, 3, unrecorded
	key := topology.FlagSetKey("shop", "flags")

	g.Expect(w.reconcile()).To(Equal(reconcile.Result{RequeueAfter: DefaultRetryAfter}))
	g.Expect(w.revisions()).To(BeEmpty())
	why, ok := unrecorded.Of(key)
	g.Expect(ok).To(BeTrue())
	g.Expect(why).To(Equal(workflows.Unrecorded{Reason: deliveryv1alpha1.ReasonNamespaceRevisionLimit,
		Message: "namespace shop holds 3 FeatureFlagRevisions, the manager's --revision-namespace-limit: the spec flagplane accepted " +
			"and serves is not recorded in the history of FeatureFlag flags (lower the revision-history-limit of FeatureFlags of the namespace, " +
			"or delete FeatureFlags or revisions)"}))
	g.Expect(changed).To(Equal([]topology.Key{key}))
	g.Expect(drain(rec)).To(ConsistOf(HavePrefix("Warning RevisionNotRecorded namespace shop holds 3 FeatureFlagRevisions")))

	g.Expect(w.reconcile()).To(Equal(reconcile.Result{RequeueAfter: 2 * DefaultRetryAfter}))
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{RequeueAfter: 4 * DefaultRetryAfter}))
	g.Expect(drain(rec)).To(BeEmpty(), "one Event per cause")
	g.Expect(changed).To(HaveLen(1))

	// A revision of the namespace goes: room for this one.
	g.Expect(w.c.Delete(context.Background(), otherRevisions(t, 1)[0])).To(Succeed())
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	g.Expect(numbers(w.revisions())).To(Equal([]int64{1}))
	_, ok = unrecorded.Of(key)
	g.Expect(ok).To(BeFalse())
	g.Expect(changed).To(Equal([]topology.Key{key, key}))

	// The namespace is at its bound again (2 others and 1); with a limit
	// of 1, the next edit deletes revision 1 first and is recorded.
	w.edit(func(ff *v1beta1.FeatureFlag) {
		setFlag(ff, "off")
		ff.Annotations = map[string]string{deliveryv1alpha1.RevisionHistoryLimitAnnotation: "1"}
	})
	w.sync()
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	g.Expect(numbers(w.revisions())).To(Equal([]int64{2}))
	g.Expect(drain(rec)).To(BeEmpty())
}

// TestReconcileRefusedRevision: a create the API server refuses for good
// (a ResourceQuota's 403) is not retried at once: one Warning Event per
// cause, the problem remembered for status, and a retry twice as late each
// time, up to MaxRetryAfter. Once the API server takes it, it is recorded.
func TestReconcileRefusedRevision(t *testing.T) {
	g := NewWithT(t)
	quota := apierrors.NewForbidden(deliveryv1alpha1.GroupVersion.WithResource("featureflagrevisions").GroupResource(), "flags-1",
		errors.New("exceeded quota: revisions, requested: count/featureflagrevisions.delivery.flagplane.dev=1, "+
			"used: count/featureflagrevisions.delivery.flagplane.dev=2, limited: count/featureflagrevisions.delivery.flagplane.dev=2"))
	refuse := true
	creates := 0
	funcs := &interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*deliveryv1alpha1.FeatureFlagRevision); ok {
			creates++
			if refuse {
				return quota
			}
		}
		return c.Create(ctx, obj, opts...)
	}}
	w := newWorld(t, funcs)
	rec := events.NewFakeRecorder(10)
	w.r.Events, w.r.Unrecorded = rec, &workflows.UnrecordedRevisions{}
	w.r.RetryAfter, w.r.MaxRetryAfter = time.Second, 5*time.Second

	var waits []time.Duration
	for range 5 {
		res, err := w.reconcile()
		g.Expect(err).NotTo(HaveOccurred(), "not an error: controller-runtime would retry it within milliseconds")
		waits = append(waits, res.RequeueAfter)
	}
	g.Expect(waits).To(Equal([]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}))
	g.Expect(creates).To(Equal(5), "one attempt per reconcile")
	g.Expect(w.revisions()).To(BeEmpty())
	why, ok := w.r.Unrecorded.Of(topology.FlagSetKey("shop", "flags"))
	g.Expect(ok).To(BeTrue())
	g.Expect(why.Reason).To(Equal(deliveryv1alpha1.ReasonRevisionRefused))
	g.Expect(why.Message).To(HavePrefix("FeatureFlagRevision shop/flags-1 not written: the API server refused it (Forbidden): "))
	g.Expect(why.Message).To(ContainSubstring("exceeded quota: revisions"))
	g.Expect(drain(rec)).To(HaveLen(1))

	refuse = false
	g.Expect(w.reconcile()).To(Equal(reconcile.Result{}))
	g.Expect(numbers(w.revisions())).To(Equal([]int64{1}))
	_, ok = w.r.Unrecorded.Of(topology.FlagSetKey("shop", "flags"))
	g.Expect(ok).To(BeFalse())

	// A failure that may pass (the API server unavailable) is an error,
	// retried by the controller's rate limiter, and no problem of status.
	refuse = true
	quota = apierrors.NewServiceUnavailable("etcd is away")
	w.edit(func(ff *v1beta1.FeatureFlag) { setFlag(ff, "off") })
	w.sync()
	_, err := w.reconcile()
	g.Expect(err).To(MatchError(ContainSubstring("etcd is away")))
	_, ok = w.r.Unrecorded.Of(topology.FlagSetKey("shop", "flags"))
	g.Expect(ok).To(BeFalse())
}
