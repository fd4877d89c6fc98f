package history

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
)

// CreatedBy is who wrote ff's spec, in the API server's word: its
// SpecAuthorAnnotation, which flagplane's mutating webhook sets to the
// request's user on every write that changes the spec and keeps on every
// other (webhooks.SpecAuthor), cut to what spec.createdBy takes. trusted
// says that the webhook is served (a manager run without webhooks cannot
// vouch for the annotation, which anyone who may edit the FeatureFlag
// could then write): else, and without the annotation (a FeatureFlag
// written while the webhook was not installed), "".
func CreatedBy(ff *v1beta1.FeatureFlag, trusted bool) string {
	if !trusted {
		return ""
	}
	return cut(ff.Annotations[deliveryv1alpha1.SpecAuthorAnnotation], createdByMaxLength)
}

// FieldManager names the field manager of an object's newest write from its
// managedFields: that of the newest entry that is not of a subresource (a
// status write is flagplane's own, never a spec's). It is the name the
// client gave itself, which says which tool wrote, as its user claims, not
// who (CreatedBy). managedFields say when each manager last wrote, not
// which write changed the spec, so a metadata-only write after the spec's
// (kubectl annotate) names its own manager.
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
func FieldManager(entries []metav1.ManagedFieldsEntry, previous string) string {
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
	return cut(best.Manager, fieldManagerMaxLength)
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

// The limits of spec.createdBy, spec.fieldManager and spec.changeCause
// (the CRD's maxLength): a longer value would have the revision refused,
// and the spec never recorded. The API server takes field managers of at
// most 128 characters, but user names and annotations of any length (a
// ServiceAccount's user name takes up to 339).
const (
	createdByMaxLength    = 512
	fieldManagerMaxLength = 128
	changeCauseMaxLength  = 1024
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
