package node

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestImageMatching(t *testing.T) {
	for _, tc := range []struct {
		ref, name string
		want      bool
	}{
		{"open-feature/flagd:v0.16.0", "open-feature/flagd", true},
		{"ghcr.io/open-feature/flagd:v0.16.0", "open-feature/flagd", true},
		{"ghcr.io/open-feature/flagd@sha256:abc", "open-feature/flagd", true},
		{"localhost:5000/open-feature/flagd", "open-feature/flagd", true},
		{"open-feature/flagd", "open-feature/flagd:v0.17.0", true},
		{"ghcr.io/open-feature/flagd:v1", "ghcr.io/open-feature/flagd", true},
		{"docker.io/open-feature/flagd:v1", "ghcr.io/open-feature/flagd", false},
		{"open-feature/flagd-proxy:v1", "open-feature/flagd", false},
		{"evil-open-feature/flagd:v1", "open-feature/flagd", false},
		{"flagd", "open-feature/flagd", false},
	} {
		NewWithT(t).Expect(imageMatches(tc.ref, tc.name)).To(Equal(tc.want), "%s ~ %s", tc.ref, tc.name)
	}
}

func TestResolveImage(t *testing.T) {
	g := NewWithT(t)
	o := &Options{FlagdImage: "open-feature/flagd", FlagdBinary: "/bin/flagd",
		Binaries: map[string]string{"app": "/bin/app", "acme/app": "/bin/acme-app"}}
	kind, bin := o.resolveImage("ghcr.io/open-feature/flagd:v0.16.0")
	g.Expect(kind).To(Equal(runFlagd))
	g.Expect(bin).To(Equal("/bin/flagd"))
	kind, bin = o.resolveImage("registry.local/acme/app:1")
	g.Expect(kind).To(Equal(runBinary))
	g.Expect(bin).To(Equal("/bin/acme-app"), "the longest name wins")
	kind, _ = o.resolveImage("nginx:1.27")
	g.Expect(kind).To(Equal(runPlaceholder))
}
