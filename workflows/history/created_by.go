package history

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CreatedBy names the author of an object's current spec from its
// managedFields: the field manager of the newest entry that is not of a
// subresource (a status write is flagplane's own, never a spec's author).
// managedFields say when each manager last wrote, not which write changed
// the spec, so a metadata-only write after the spec's (kubectl annotate)
// names its own manager.
//
// Times have a resolution of one second, and a script or a controller
// often writes twice in one (create, then edit). Of entries of the newest
// second, one of a manager other than previous (the author of the
// revision before, "" for none) wins: the one that wrote the previous
// spec is the less likely to have written this one. Among those left, the
// last in the API server's order (Apply before Update, then by manager
// name) wins, so that the answer does not depend on the order of the
// list. "" when no entry qualifies (an object written without field
// tracking).
//
// The manager's cache keeps a FeatureFlag's entries without their field
// sets (controllers.CacheOptions), which this does not read.
func CreatedBy(entries []metav1.ManagedFieldsEntry, previous string) string {
	var best *metav1.ManagedFieldsEntry
	for i := range entries {
		e := &entries[i]
		if e.Subresource != "" || e.Manager == "" {
			continue
		}
		if best == nil || newer(e, best, previous) {
			best = e
		}
	}
	if best == nil {
		return ""
	}
	return cut(best.Manager, createdByMaxLength)
}

// newer tells whether a is a later write than b: of a later second, or of
// the same second and not previous's when b is, or else listed after b by
// the API server.
func newer(a, b *metav1.ManagedFieldsEntry, previous string) bool {
	at, bt := seconds(a.Time), seconds(b.Time)
	if at != bt {
		return at > bt
	}
	if aPrev, bPrev := a.Manager == previous, b.Manager == previous; aPrev != bPrev {
		return bPrev
	}
	if a.Operation != b.Operation {
		return a.Operation > b.Operation
	}
	return a.Manager > b.Manager
}

func seconds(t *metav1.Time) int64 {
	if t == nil {
		return 0
	}
	return t.Unix()
}

// The limits of spec.createdBy and spec.changeCause (the CRD's
// maxLength): a longer value would have the revision refused, and the spec
// never recorded. The API server takes field managers of at most 128
// characters, but annotations of any length.
const (
	createdByMaxLength   = 128
	changeCauseMaxLength = 1024
)

// cut shortens s to at most n bytes, at a character.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !startsRune(s[n]) {
		n--
	}
	return s[:n]
}

// startsRune tells whether b begins a UTF-8 sequence.
func startsRune(b byte) bool { return b&0xC0 != 0x80 }
