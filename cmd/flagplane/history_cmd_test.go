package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

// TestHistoryCommandLines: the usage errors of history, rollback and diff
// --revisions, before any cluster is asked.
func TestHistoryCommandLines(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"history"}, "give one FeatureFlag as ff/NAME"},
		{[]string{"history", "ff/a", "ff/b"}, "give one FeatureFlag as ff/NAME"},
		{[]string{"history", "deploy/web"}, `name the FeatureFlag as ff/NAME, not "deploy/web"`},
		{[]string{"history", "ff/"}, `name the FeatureFlag as ff/NAME, not "ff/"`},
		{[]string{"history", "ff/flags", "-o", "xml"}, `unknown -o "xml": use one of text, wide, json, yaml`},
		{[]string{"rollback", "ff/flags"}, "give the revision to roll back to with --to-revision N"},
		{[]string{"rollback", "ff/flags", "--to-revision", "two"}, `invalid argument "two" for "--to-revision"`},
		{[]string{"diff", "ff/flags"}, `unexpected arguments ["ff/flags"]`},
		{[]string{"diff", "ff/flags", "--revisions", "1-2"}, `--revisions is A..B, each a revision number or current (not "1-2")`},
		{[]string{"diff", "ff/flags", "--revisions", "0..current"}, `--revisions is A..B`},
		{[]string{"diff", "ff/flags", "--revisions", "1..2", "-f", "x.yaml"}, "leave out -f and --from-dir"},
		{[]string{"diff", "ff/flags", "--revisions", "1..2", "--from-dir", "."}, "leave out -f and --from-dir"},
		{[]string{"diff", "--revisions", "1..2"}, "give one FeatureFlag as ff/NAME"},
	}
	for _, tt := range tests {
		g := NewWithT(t)
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), tt.args, &stdout, &stderr)
		g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)), "%v", tt.args)
		g.Expect(exitCode(err)).To(Equal(2), "%v: a usage error", tt.args)
		g.Expect(stderr.String()).To(ContainSubstring("See 'flagplane " + tt.args[0] + " --help'."))
	}
	// Past the usage, a cluster is needed.
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"history", "featureflag/flags", "-n", "shop"}, &stdout, &stderr)
	g := NewWithT(t)
	g.Expect(err).To(MatchError(ContainSubstring("loading kubeconfig: there is none")))
	g.Expect(exitCode(err)).To(Equal(1))
}

func revisionOf(number int64, hash, by, fieldManager, cause string, created time.Time) *deliveryv1alpha1.FeatureFlagRevision {
	return &deliveryv1alpha1.FeatureFlagRevision{ObjectMeta: metav1.ObjectMeta{Name: "flags-" + string(rune('0'+number)), CreationTimestamp: metav1.NewTime(created)},
		Spec: deliveryv1alpha1.FeatureFlagRevisionSpec{FlagSet: "flags", Number: number, Revision: hash, CreatedBy: by, FieldManager: fieldManager,
			ChangeCause: cause}}
}

// TestWriteHistory: the table, oldest first, the revision served marked
// (the newest of its hash), who wrote each (and with -o wide the field
// manager its client named), and what it says when none is served.
func TestWriteHistory(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	h := &flagSetHistory{
		ff: &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flags"}, Status: v1beta1.FeatureFlagStatus{Revision: "aaaaaaaaaaaa"}},
		revisions: []*deliveryv1alpha1.FeatureFlagRevision{
			revisionOf(1, "aaaaaaaaaaaa", "bob", "bob-create", "first", now.Add(-2*time.Hour)),
			revisionOf(2, "bbbbbbbbbbbb", "alice", "alice-edit", "turn\nit off", now.Add(-90*time.Second)),
			revisionOf(3, "aaaaaaaaaaaa", "system:serviceaccount:ci:deployer", "flagplane-rollback", "rollback to revision 1", now.Add(-5*time.Second)),
			revisionOf(4, "aaaaaaaaaaaa", "", "kubectl-edit", "", now.Add(-time.Second)),
		},
	}
	var b bytes.Buffer
	g.Expect(writeHistory(&b, h, now, false)).To(Succeed())
	g.Expect(b.String()).To(Equal(`NUMBER  REVISION      AGE   BY                                 CAUSE
1       aaaaaaaaaaaa  120m  bob                                first
2       bbbbbbbbbbbb  90s   alice                              turn it off
3       aaaaaaaaaaaa  5s    system:serviceaccount:ci:deployer  rollback to revision 1
4*      aaaaaaaaaaaa  1s    <unknown>
* serves now (status.revision aaaaaaaaaaaa)
`))
	b.Reset()
	g.Expect(writeHistory(&b, h, now, true)).To(Succeed())
	g.Expect(b.String()).To(Equal(`NUMBER  REVISION      AGE   BY                                 FIELD MANAGER       CAUSE
1       aaaaaaaaaaaa  120m  bob                                bob-create          first
2       bbbbbbbbbbbb  90s   alice                              alice-edit          turn it off
3       aaaaaaaaaaaa  5s    system:serviceaccount:ci:deployer  flagplane-rollback  rollback to revision 1
4*      aaaaaaaaaaaa  1s    <unknown>                          kubectl-edit
* serves now (status.revision aaaaaaaaaaaa)
`))
	h.revisions = h.revisions[:3]

	h.revisions[0].Spec.ChangeCause = ""
	b.Reset()
	g.Expect(writeHistory(&b, h, now, false)).To(Succeed())
	g.Expect(b.String()).To(ContainSubstring("\n1       aaaaaaaaaaaa  120m  bob\n"), "no trailing spaces")

	h.ff.Status.Revision = "cccccccccccc"
	b.Reset()
	g.Expect(writeHistory(&b, h, now, false)).To(Succeed())
	g.Expect(b.String()).To(HaveSuffix("status.revision cccccccccccc is no recorded revision: flagplane has not accepted the current spec (yet)\n"))
	g.Expect(b.String()).NotTo(ContainSubstring("*"))

	// The spec it serves not recorded: the status says why, and so does
	// the table.
	h.ff.Status.Conditions = []metav1.Condition{{Type: deliveryv1alpha1.ConditionRevisionRecorded, Status: metav1.ConditionFalse,
		Reason: deliveryv1alpha1.ReasonRevisionRefused, Message: "FeatureFlagRevision shop/flags-4 not written: the API server refused it (Forbidden):\nexceeded quota"}}
	b.Reset()
	g.Expect(writeHistory(&b, h, now, false)).To(Succeed())
	g.Expect(b.String()).To(HaveSuffix("3       aaaaaaaaaaaa  5s    system:serviceaccount:ci:deployer  rollback to revision 1\n" +
		"status.revision cccccccccccc is served, and not recorded (RevisionRefused): FeatureFlagRevision shop/flags-4 not written: the API server refused it (Forbidden): exceeded quota\n"))

	_, err := h.revision(7)
	g.Expect(err).To(MatchError("FeatureFlag shop/flags has no revision 7: it has 1, 2, 3"))
	h.revisions = nil
	_, err = h.revision(1)
	g.Expect(err).To(MatchError(ContainSubstring("FeatureFlag shop/flags has no recorded revisions")))
}

// TestFlagSpecChanges: what a rollback changes, flag by flag, compared as
// JSON values (raw JSON spelled otherwise is the same).
func TestFlagSpecChanges(t *testing.T) {
	g := NewWithT(t)
	spec := func(def string, targeting string, extra ...string) v1beta1.FlagSpec {
		s := v1beta1.FlagSpec{Flags: map[string]v1beta1.Flag{
			"a": {State: v1beta1.FlagStateEnabled, DefaultVariant: def, Variants: json.RawMessage(`{"on":true,"off":false}`)},
		}}
		if targeting != "" {
			f := s.Flags["a"]
			f.Targeting = json.RawMessage(targeting)
			s.Flags["a"] = f
		}
		for _, k := range extra {
			s.Flags[k] = v1beta1.Flag{State: v1beta1.FlagStateDisabled, DefaultVariant: "on", Variants: json.RawMessage(`{"on":1}`)}
		}
		return s
	}
	changes, err := flagSpecChanges(spec("on", `{"if":[true,"on"]}`), spec("on", `{ "if" : [ true, "on" ] }`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changes).To(BeEmpty(), "the same JSON value")

	changes, err = flagSpecChanges(spec("on", "", "b"), spec("off", `{"if":[true,"on"]}`, "c"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changes).To(Equal([]string{"flag a: defaultVariant, targeting changed", "flag b: removed", "flag c: added"}))

	withMeta := spec("on", "")
	withMeta.Metadata = json.RawMessage(`{"team":"shop"}`)
	changes, err = flagSpecChanges(spec("on", ""), withMeta)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changes).To(Equal([]string{"metadata changed"}))
}

// TestRollbackReadsOnlyTheFlagSetsOwnRevisions: a revision is the flag
// set's own when its controller is the FeatureFlag (its UID) and its
// flagSpec is the hash it claims; label and spec.flagSet are not enough.
// A forged revision 1 that sorts before the real one (its name), claims
// revision 1's hash and even names the FeatureFlag's UID as controller is
// not rolled back to; an orphan and another UID's revision are refused with
// the reason, and all three are listed apart.
func TestRollbackReadsOnlyTheFlagSetsOwnRevisions(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := runtime.NewScheme()
	g.Expect(v1beta1.AddToScheme(s)).To(Succeed())
	g.Expect(deliveryv1alpha1.AddToScheme(s)).To(Succeed())

	spec := func(value string) v1beta1.FlagSpec {
		return v1beta1.FlagSpec{Flags: map[string]v1beta1.Flag{"color": {State: v1beta1.FlagStateEnabled, DefaultVariant: "v",
			Variants: json.RawMessage(`{"v":"` + value + `"}`)}}}
	}
	hashOf := func(fs v1beta1.FlagSpec) string {
		content, err := flagsets.Render(&v1beta1.FeatureFlag{Spec: v1beta1.FeatureFlagSpec{FlagSpec: fs}})
		g.Expect(err).NotTo(HaveOccurred())
		return flagsets.Revision(content)
	}
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flags", UID: "ff-uid"},
		Spec: v1beta1.FeatureFlagSpec{FlagSpec: spec("green")}}
	ff.Status.Revision = hashOf(spec("green"))
	revision := func(name string, number int64, fs v1beta1.FlagSpec, claimed string, owner types.UID) *deliveryv1alpha1.FeatureFlagRevision {
		r := &deliveryv1alpha1.FeatureFlagRevision{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: map[string]string{deliveryv1alpha1.FlagSetLabel: "flags"}},
			Spec:       deliveryv1alpha1.FeatureFlagRevisionSpec{FlagSet: "flags", Number: number, Revision: claimed, FlagSpec: fs},
		}
		if owner != "" {
			r.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1beta1.GroupVersion.String(), Kind: v1beta1.FeatureFlagKind,
				Name: "flags", UID: owner, Controller: ptr.To(true)}}
		}
		return r
	}
	red, green := spec("red"), spec("green")
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(ff,
		revision("flags-1", 1, red, hashOf(red), "ff-uid"),
		revision("flags-2", 2, green, hashOf(green), "ff-uid"),
		// Forged: revision 1's number and hash, the FeatureFlag's UID, and
		// a name that sorts first; its content is not what it claims.
		revision("a-forged-1", 1, spec("evil"), hashOf(red), "ff-uid"),
		// Left by an earlier FeatureFlag of the name (--cascade=orphan).
		revision("flags-3", 3, red, hashOf(red), ""),
		// Of another FeatureFlag of the name, not deleted yet.
		revision("flags-4", 4, red, topology.ShortRevision(hashOf(red)), "old-uid"),
	).Build()

	h, err := readHistory(ctx, c, "shop", "flags")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(numbers(h.revisions)).To(Equal([]int64{1, 2}))
	g.Expect(h.revisions[0].Name).To(Equal("flags-1"))
	var b bytes.Buffer
	g.Expect(writeHistory(&b, h, time.Now(), false)).To(Succeed())
	g.Expect(b.String()).To(ContainSubstring("not revisions of this FeatureFlag (history --revision, diff and rollback refuse them):\n" +
		"  a-forged-1 (number 1): its flagSpec is revision " + topology.ShortRevision(hashOf(spec("evil"))) +
		", not the " + topology.ShortRevision(hashOf(red)) + " it claims\n" +
		"  flags-3 (number 3): it has no controller"))
	g.Expect(b.String()).To(ContainSubstring("  flags-4 (number 4): its controller is FeatureFlag flags (uid old-uid), not this FeatureFlag (uid ff-uid)\n"))

	b.Reset()
	g.Expect(rollback(ctx, c, "shop", "flags", 1, false, &b)).To(Succeed())
	g.Expect(b.String()).To(ContainSubstring("rolled back to revision 1 (" + topology.ShortRevision(hashOf(red)) + ")"))
	got := &v1beta1.FeatureFlag{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(ff), got)).To(Succeed())
	g.Expect(got.Spec.FlagSpec).To(Equal(red), "revision 1's own content, not the forgery's")

	for number, why := range map[int64]string{
		3: "FeatureFlagRevision shop/flags-3 (number 3) is not a revision of FeatureFlag shop/flags: it has no controller",
		4: "FeatureFlagRevision shop/flags-4 (number 4) is not a revision of FeatureFlag shop/flags: its controller is FeatureFlag flags (uid old-uid)",
	} {
		b.Reset()
		g.Expect(rollback(ctx, c, "shop", "flags", number, false, &b)).To(MatchError(ContainSubstring(why)))
		h, err := readHistory(ctx, c, "shop", "flags")
		g.Expect(err).NotTo(HaveOccurred())
		_, err = flagSpecOf(h, strconv.FormatInt(number, 10))
		g.Expect(err).To(MatchError(ContainSubstring(why)), "diff --revisions refuses it too")
	}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(ff), got)).To(Succeed())
	g.Expect(got.Spec.FlagSpec).To(Equal(red), "nothing written")
}

func numbers(revs []*deliveryv1alpha1.FeatureFlagRevision) []int64 {
	out := []int64{}
	for _, r := range revs {
		out = append(out, r.Spec.Number)
	}
	return out
}
