package topology

import "strings"

// Revision identity. A flag set's revision is the hex of the first 16 bytes
// (128 bits) of the SHA-256 of its rendering (flagsets.Revision): two specs
// that share a revision, and so would pass for one another in a plan, in
// history and in status, take about 2^64 tries to find. Before, revisions
// kept 6 bytes (48 bits, 12 hex digits), and a colliding pair took about
// 2^24; such legacy revisions are still found in what earlier versions
// stored (a rollout policy's status, a FeatureFlagRevision's spec), and one
// is the same revision as a full one that it begins (SameRevision).

// ShortRevisionLength is how many hex digits of a revision display shows
// (ShortRevision), and how many a legacy revision has.
const ShortRevisionLength = 12

// ShortRevision is the first ShortRevisionLength hex digits of a revision,
// for display only: tables and messages people read. Never compare short
// forms: that brings back the 48 bits.
func ShortRevision(r string) string {
	if len(r) <= ShortRevisionLength {
		return r
	}
	return r[:ShortRevisionLength]
}

// IsLegacyRevision tells whether r is a revision of 48 bits, as versions
// before 128-bit revisions recorded them: 12 lowercase hex digits.
func IsLegacyRevision(r string) bool {
	if len(r) != ShortRevisionLength {
		return false
	}
	for i := 0; i < len(r); i++ {
		if c := r[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// SameRevision tells whether a and b name the same revision: they are
// equal, or one is a legacy revision (IsLegacyRevision) that begins the
// other, a full revision of the same content. Only values that an earlier
// version stored are legacy; everything flagplane computes now is full.
func SameRevision(a, b string) bool {
	if a == b {
		return true
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	return IsLegacyRevision(a) && len(b) > len(a) && strings.HasPrefix(b, a)
}
