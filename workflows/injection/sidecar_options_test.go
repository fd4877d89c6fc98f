package injection

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestSidecarOptions(t *testing.T) {
	with := func(mutate func(*SidecarOptions)) SidecarOptions {
		o := DefaultSidecarOptions()
		mutate(&o)
		return o
	}
	tests := []struct {
		name      string
		opts      SidecarOptions
		wantImage string
		wantErr   string
	}{
		{name: "defaults: flagd's published image, as the OpenFeature Operator injects it", opts: DefaultSidecarOptions(),
			wantImage: DefaultSidecarImage + ":v0.16.0"},
		{name: "no tag", opts: with(func(o *SidecarOptions) { o.Image, o.Tag = "mirror/flagd", "" }), wantImage: "mirror/flagd"},
		{name: "no image", opts: with(func(o *SidecarOptions) { o.Image, o.Tag = "", "v1" }), wantImage: ":v1", wantErr: "sidecar image is empty"},
		{name: "request above limit", opts: with(func(o *SidecarOptions) { o.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("128M") }),
			wantImage: DefaultSidecarImage + ":v0.16.0", wantErr: "sidecar memory request 128M exceeds its limit 64M"},
		{name: "request equal to limit", opts: with(func(o *SidecarOptions) { o.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("0.5") }),
			wantImage: DefaultSidecarImage + ":v0.16.0"},
		{name: "a port out of range", opts: with(func(o *SidecarOptions) { o.Port = 70000 }),
			wantImage: DefaultSidecarImage + ":v0.16.0", wantErr: "sidecar port 70000 is not a port"},
		{name: "port and management port on one number", opts: with(func(o *SidecarOptions) { o.ManagementPort = 8013 }),
			wantImage: DefaultSidecarImage + ":v0.16.0", wantErr: "sidecar port and management port are both 8013"},
		{name: "a log format flagd does not know", opts: with(func(o *SidecarOptions) { o.LogFormat = "text" }),
			wantImage: DefaultSidecarImage + ":v0.16.0", wantErr: `sidecar log format "text" is not json or console`},
		{name: "no env var prefix: names without one, as the OpenFeature Operator allows", opts: with(func(o *SidecarOptions) { o.EnvVarPrefix = "" }),
			wantImage: DefaultSidecarImage + ":v0.16.0"},
		{name: "an env var prefix that makes invalid names", opts: with(func(o *SidecarOptions) { o.EnvVarPrefix = "1=" }),
			wantImage: DefaultSidecarImage + ":v0.16.0", wantErr: "sidecar env var prefix"},
		{name: "an image pull secret that is not a name", opts: with(func(o *SidecarOptions) { o.ImagePullSecrets = []string{"Reg Creds"} }),
			wantImage: DefaultSidecarImage + ":v0.16.0", wantErr: `image pull secret "Reg Creds"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(tt.opts.ImageReference()).To(Equal(tt.wantImage))
			if tt.wantErr == "" {
				g.Expect(tt.opts.Validate()).To(Succeed())
			} else {
				g.Expect(tt.opts.Validate()).To(MatchError(ContainSubstring(tt.wantErr)))
			}
		})
	}
}

func TestInProcessOptions(t *testing.T) {
	g := NewWithT(t)
	g.Expect(DefaultInProcessOptions().Validate()).To(Succeed())
	o := DefaultInProcessOptions()
	o.Cache, o.Port, o.CacheMaxSize = "fifo", 0, -1
	g.Expect(o.Validate()).To(MatchError(And(ContainSubstring(`in-process cache "fifo"`), ContainSubstring("in-process port 0"),
		ContainSubstring("cache max size -1"))))
}

// TestEnvVarNames: names are prefixed as the OpenFeature Operator prefixes
// them; a source's cloud-storage credentials are not.
func TestEnvVarNames(t *testing.T) {
	g := NewWithT(t)
	g.Expect(EnvVarKey("FLAGD", "PORT")).To(Equal("FLAGD_PORT"))
	g.Expect(EnvVarKey("", "PORT")).To(Equal("PORT"))
	g.Expect(EnvVarKey("  ", "PORT")).To(Equal("PORT"))
	for name, want := range map[string]string{
		"AWS_ACCESS_KEY_ID":              "AWS_ACCESS_KEY_ID",
		"AWS_REGION":                     "AWS_REGION",
		"AZURE_STORAGE_ACCOUNT":          "AZURE_STORAGE_ACCOUNT",
		"AZURE_STORAGEKEY":               "AZURE_STORAGEKEY",
		"GOOGLE_APPLICATION_CREDENTIALS": "GOOGLE_APPLICATION_CREDENTIALS",
		"AWSX":                           "FLAGD_AWSX",
		"AZURE_CLIENT_ID":                "FLAGD_AZURE_CLIENT_ID",
		"GOOGLEX":                        "FLAGD_GOOGLEX",
		"LOG_LEVEL":                      "FLAGD_LOG_LEVEL",
		"aws_access_key_id":              "FLAGD_aws_access_key_id",
	} {
		g.Expect(SourceEnvVarKey("FLAGD", name)).To(Equal(want), name)
	}
}
