package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
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
		{[]string{"history", "ff/flags", "-o", "wide"}, `unknown -o "wide": use one of text, json, yaml`},
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

func revisionOf(number int64, hash, by, cause string, created time.Time) *deliveryv1alpha1.FeatureFlagRevision {
	return &deliveryv1alpha1.FeatureFlagRevision{ObjectMeta: metav1.ObjectMeta{Name: "flags-" + string(rune('0'+number)), CreationTimestamp: metav1.NewTime(created)},
		Spec: deliveryv1alpha1.FeatureFlagRevisionSpec{FlagSet: "flags", Number: number, Revision: hash, CreatedBy: by, ChangeCause: cause}}
}

// TestWriteHistory: the table, oldest first, the revision served marked
// (the newest of its hash), and what it says when none is.
func TestWriteHistory(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	h := &flagSetHistory{
		ff: &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "flags"}, Status: v1beta1.FeatureFlagStatus{Revision: "aaaaaaaaaaaa"}},
		revisions: []*deliveryv1alpha1.FeatureFlagRevision{
			revisionOf(1, "aaaaaaaaaaaa", "bob-create", "first", now.Add(-2*time.Hour)),
			revisionOf(2, "bbbbbbbbbbbb", "alice-edit", "turn\nit off", now.Add(-90*time.Second)),
			revisionOf(3, "aaaaaaaaaaaa", "flagplane-rollback", "rollback to revision 1", now.Add(-5*time.Second)),
		},
	}
	var b bytes.Buffer
	g.Expect(writeHistory(&b, h, now)).To(Succeed())
	g.Expect(b.String()).To(Equal(`NUMBER  REVISION      AGE   BY                  CAUSE
1       aaaaaaaaaaaa  120m  bob-create          first
2       bbbbbbbbbbbb  90s   alice-edit          turn it off
3*      aaaaaaaaaaaa  5s    flagplane-rollback  rollback to revision 1
* serves now (status.revision aaaaaaaaaaaa)
`))

	h.revisions[0].Spec.ChangeCause = ""
	b.Reset()
	g.Expect(writeHistory(&b, h, now)).To(Succeed())
	g.Expect(b.String()).To(ContainSubstring("\n1       aaaaaaaaaaaa  120m  bob-create\n"), "no trailing spaces")

	h.ff.Status.Revision = "cccccccccccc"
	b.Reset()
	g.Expect(writeHistory(&b, h, now)).To(Succeed())
	g.Expect(b.String()).To(HaveSuffix("status.revision cccccccccccc is no recorded revision: flagplane has not accepted the current spec (yet)\n"))
	g.Expect(b.String()).NotTo(ContainSubstring("*"))

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
