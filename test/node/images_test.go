package node

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/flagplane/flagplane/test/node/internal/mountns"
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

// A binary stands for its image's entrypoint; a placeholder runs nothing of
// its image, so only a binary's container is refused a command.
func TestRunMode(t *testing.T) {
	o := &Options{FlagdImage: "open-feature/flagd", FlagdBinary: "/bin/flagd",
		Binaries: map[string]string{"example.com/shop/sdk-app": "/bin/sdk-app"}}
	sh := []string{"sh", "-c", "echo The app is running! && sleep infinity"}
	for _, tc := range []struct {
		name    string
		image   string
		command []string
		args    []string
		want    mountns.Mode
		wantErr string
	}{
		{name: "unknown image", image: "nginx:stable-alpine", want: mountns.ModeIdle},
		{name: "unknown image with a command", image: "busybox:1.37.0", command: sh, want: mountns.ModeIdle},
		{name: "unknown image with command and args", image: "curlimages/curl:8.11.1", command: []string{"/bin/sh"}, args: []string{"-ec", "curl ..."}, want: mountns.ModeIdle},
		{name: "flagd", image: "open-feature/flagd:v0.16.0", args: []string{"start"}, want: mountns.ModeExec},
		{name: "flagd with a command", image: "open-feature/flagd:v0.16.0", command: []string{"/flagd-build"}, wantErr: `container sets command ["/flagd-build"]`},
		{name: "a listed image", image: "example.com/shop/sdk-app:1.0", want: mountns.ModeExec},
		{name: "a listed image with a command", image: "example.com/shop/sdk-app:1.0", command: sh, wantErr: "runs image example.com/shop/sdk-app:1.0 as sdk-app"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := &corev1.Container{Name: "c", Image: tc.image, Command: tc.command, Args: tc.args}
			kind, binary := o.resolveImage(spec.Image)
			mode, err := runMode(kind, binary, spec)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(mode).To(Equal(tc.want))
		})
	}
}
