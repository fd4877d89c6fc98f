package history

import (
	"testing"

	. "github.com/onsi/gomega"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
)

// history is revisions numbered from 1 with the hashes given.
func history(hashes ...string) []*deliveryv1alpha1.FeatureFlagRevision {
	out := make([]*deliveryv1alpha1.FeatureFlagRevision, len(hashes))
	for i, h := range hashes {
		out[i] = &deliveryv1alpha1.FeatureFlagRevision{Spec: deliveryv1alpha1.FeatureFlagRevisionSpec{Number: int64(i + 1), Revision: h}}
	}
	return out
}

func numbers(revs []*deliveryv1alpha1.FeatureFlagRevision) []int64 {
	out := []int64{}
	for _, r := range revs {
		out = append(out, r.Spec.Number)
	}
	return out
}

// Full revisions (32 hex digits) and the legacy form of one (its first 12).
const (
	fullA   = "aaaaaaaaaaaa0123456789abcdef0123"
	legacyA = "aaaaaaaaaaaa"
	fullB   = "bbbbbbbbbbbb0123456789abcdef0123"
	fullC   = "cccccccccccc0123456789abcdef0123"
)

func TestPrunable(t *testing.T) {
	tests := []struct {
		name   string
		hashes []string
		limit  int
		keep   []string
		want   []int64
	}{
		{name: "within the limit: nothing", hashes: []string{"a", "b"}, limit: 2, keep: []string{"b"}, want: []int64{}},
		{name: "the oldest first", hashes: []string{"a", "b", "c", "d"}, limit: 2, keep: []string{"d"}, want: []int64{1, 2}},
		{name: "the one served is kept, the next oldest goes instead", hashes: []string{"a", "b", "c", "d"}, limit: 2, keep: []string{"a"},
			want: []int64{2, 3}},
		{name: "what a rollout names is kept too", hashes: []string{"a", "b", "c", "d", "e"}, limit: 2, keep: []string{"e", "b", "c"},
			want: []int64{1, 4}},
		{name: "limit 0 keeps only what is needed", hashes: []string{"a", "b", "c"}, limit: 0, keep: []string{"c"}, want: []int64{1, 2}},
		{name: "more needed than the limit: all of them stay", hashes: []string{"a", "b", "c"}, limit: 1, keep: []string{"a", "b", "c"},
			want: []int64{}},
		{name: "a spec applied again: its older revision is history", hashes: []string{"a", "b", "a"}, limit: 2, keep: []string{"a"},
			want: []int64{1}},
		{name: "a spec applied again, limit 1: only its newest stays", hashes: []string{"a", "b", "a"}, limit: 1, keep: []string{"a"},
			want: []int64{1, 2}},
		{name: "a negative limit is 0", hashes: []string{"a", "b"}, limit: -3, keep: []string{"b"}, want: []int64{1}},
		// Revisions of 48 bits (12 hex digits), recorded before revisions
		// had 128, are the full revision they begin.
		{name: "a legacy revision is kept for the full hash it begins", hashes: []string{legacyA, fullB, fullC}, limit: 1, keep: []string{fullA, fullC},
			want: []int64{2}},
		{name: "a full revision is kept for the legacy hash a rollout names", hashes: []string{fullA, fullB, fullC}, limit: 1, keep: []string{legacyA, fullC},
			want: []int64{2}},
		{name: "a legacy and a full revision of one content: the newer stays", hashes: []string{legacyA, fullB, fullA}, limit: 1, keep: []string{fullA},
			want: []int64{1, 2}},
		{name: "a legacy revision of other content is not kept", hashes: []string{legacyA, fullB}, limit: 1, keep: []string{"aaaaaaaaaaab" + fullA[12:], fullB},
			want: []int64{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(numbers(Prunable(history(tt.hashes...), tt.limit, tt.keep))).To(Equal(tt.want))
		})
	}
}

func TestLimit(t *testing.T) {
	tests := []struct {
		value   *string
		want    int
		wantErr string
	}{
		{value: nil, want: 10},
		{value: strPtr("3"), want: 3},
		{value: strPtr("0"), want: 0},
		{value: strPtr("-1"), want: 10, wantErr: `annotation delivery.flagplane.dev/revision-history-limit="-1" is not a non-negative integer: keeping 10 revisions`},
		{value: strPtr("ten"), want: 10, wantErr: `"ten" is not a non-negative integer`},
		{value: strPtr(""), want: 10, wantErr: `"" is not`},
		{value: strPtr("100"), want: 100},
		{value: strPtr("101"), want: 100, wantErr: `annotation delivery.flagplane.dev/revision-history-limit="101" is more than the 100 revisions flagplane keeps of a flag set: keeping 100`},
		{value: strPtr("99999999999999999999"), want: 100, wantErr: `="99999999999999999999" is more than the 100 revisions`},
		{value: strPtr("-99999999999999999999"), want: 10, wantErr: "is not a non-negative integer"},
	}
	for _, tt := range tests {
		g := NewWithT(t)
		annotations := map[string]string{"other": "1"}
		if tt.value != nil {
			annotations[deliveryv1alpha1.RevisionHistoryLimitAnnotation] = *tt.value
		}
		got, err := Limit(annotations, 10)
		g.Expect(got).To(Equal(tt.want))
		if tt.wantErr == "" {
			g.Expect(err).NotTo(HaveOccurred())
		} else {
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
		}
	}
}

func strPtr(s string) *string { return &s }
