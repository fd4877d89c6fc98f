package workflows

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestSidecarOptions(t *testing.T) {
	withRequest := func(name corev1.ResourceName, q string) SidecarOptions {
		o := DefaultSidecarOptions()
		o.Resources.Requests[name] = resource.MustParse(q)
		return o
	}
	tests := []struct {
		name      string
		opts      SidecarOptions
		wantImage string
		wantErr   string
	}{
		{name: "defaults", opts: DefaultSidecarOptions(), wantImage: "open-feature/flagd:v0.16.0"},
		{name: "no tag", opts: SidecarOptions{Image: "mirror/flagd"}, wantImage: "mirror/flagd"},
		{name: "no image", opts: SidecarOptions{Tag: "v1"}, wantImage: ":v1", wantErr: "sidecar image is empty"},
		{name: "request above limit", opts: withRequest(corev1.ResourceMemory, "128M"), wantImage: "open-feature/flagd:v0.16.0",
			wantErr: "sidecar memory request 128M exceeds its limit 64M"},
		{name: "request equal to limit", opts: withRequest(corev1.ResourceCPU, "0.5"), wantImage: "open-feature/flagd:v0.16.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(tt.opts.ImageReference()).To(Equal(tt.wantImage))
			if tt.wantErr == "" {
				g.Expect(tt.opts.Validate()).To(Succeed())
			} else {
				g.Expect(tt.opts.Validate()).To(MatchError(tt.wantErr))
			}
		})
	}
}
