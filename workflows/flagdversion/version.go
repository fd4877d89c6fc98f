package flagdversion

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// Version is a flagd daemon release, the X.Y.Z of its tag flagd/vX.Y.Z in
// flagd's repository and of its image tag vX.Y.Z.
type Version struct{ Major, Minor, Patch int }

// V makes a Version.
func V(major, minor, patch int) Version { return Version{major, minor, patch} }

// String is the image tag of the version: vX.Y.Z.
func (v Version) String() string { return fmt.Sprintf("v%d.%d.%d", v.Major, v.Minor, v.Patch) }

// IsZero tells whether v is the zero Version (no version).
func (v Version) IsZero() bool { return v == Version{} }

// Compare is -1, 0 or +1 as v is older than, the same as or newer than o.
func (v Version) Compare(o Version) int {
	return cmp.Or(cmp.Compare(v.Major, o.Major), cmp.Compare(v.Minor, o.Minor), cmp.Compare(v.Patch, o.Patch))
}

// AtLeast tells whether v is o or newer.
func (v Version) AtLeast(o Version) bool { return v.Compare(o) >= 0 }

// Parse reads the version of an image tag: "v0.15.4" or "0.15.4", also
// pinned by a digest ("v0.15.4@sha256:..."). Anything else ("latest", a
// pre-release such as "v0.16.0-rc.1", a bare digest, "") has no version
// flagplane can know: ok is false.
func Parse(tag string) (v Version, ok bool) {
	tag, _, _ = strings.Cut(tag, "@")
	parts := strings.Split(strings.TrimPrefix(tag, "v"), ".")
	if len(parts) != 3 {
		return Version{}, false
	}
	var n [3]int
	for i, p := range parts {
		if p == "" || (len(p) > 1 && p[0] == '0') {
			return Version{}, false
		}
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 || strings.ContainsAny(p, "+-") {
			return Version{}, false
		}
		n[i] = x
	}
	return V(n[0], n[1], n[2]), true
}
