package flagds

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagdversion"
	"github.com/flagplane/flagplane/workflows/manifests"
)

// TestEveryVouchedRelease: the flagd container of every Flagd of every
// golden input, run as every release flagplane vouches for (--flagd-tag),
// is taken by that release (flagdversion.Facts.Check), and its Deployment
// says the release it runs.
func TestEveryVouchedRelease(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.in.yaml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, in := range inputs {
		data, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		topo := topology.New()
		if err := manifests.Load(topo, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		v := topo.Snapshot()
		for _, release := range flagdversion.Vouched() {
			facts, _ := flagdversion.For(release)
			o := goldenFlagdOptions()
			o.Tag = release.String()
			o.SyncPort, o.OFREPPort = 9015, 9016 // written as flags
			for _, k := range v.Flagds() {
				objs := Desired(v, k, o)
				g := NewWithT(t)
				if objs.Deployment == nil {
					// Before v0.15.6 a flagd-proxy source cannot be served: the
					// sync server's credential needs --sources headers.
					if len(objs.FlagdVersionGaps) > 0 {
						g.Expect(release.AtLeast(flagdversion.V(0, 15, 6))).To(BeFalse())
						g.Expect(objs.Unservable).NotTo(BeEmpty())
					}
					continue
				}
				g.Expect(objs.Release.Vouched).To(BeTrue())
				g.Expect(objs.Release.String()).To(Equal("flagd " + release.String() + " (--flagd-tag)"))
				c := objs.Deployment.Spec.Template.Spec.Containers[0]
				g.Expect(c.Image).To(HaveSuffix(":" + release.String()))
				g.Expect(slices.Contains(c.Args, "--sync-port")).To(BeTrue())
				var appOnly []string
				for _, e := range c.Env {
					if _, reads := facts.EnvFlag(e.Name); !reads {
						appOnly = append(appOnly, e.Name) // for the apps: FLAGD_RESOLVER, FLAGD_EVALUATOR
					}
				}
				g.Expect(appOnly).To(ContainElements("FLAGD_RESOLVER", "FLAGD_EVALUATOR"))
				g.Expect(facts.Check(c.Args, c.Env, appOnly...)).To(BeEmpty(), "%s %s as flagd %s", filepath.Base(in), k, release)
			}
		}
	}
}

// TestFlagdVersionCondition: a Flagd says whether flagplane vouches for
// the release its Deployment runs (--flagd-tag, else --sidecar-tag) and
// what of its source that release cannot take.
func TestFlagdVersionCondition(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "flagd-proxy.in.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	topo := topology.New()
	if err := manifests.Load(topo, f); err != nil {
		t.Fatal(err)
	}
	v := topo.Snapshot()
	key := topology.FlagdKey("shop", "proxied")
	fd, _ := v.Flagd(key)
	for _, tc := range []struct {
		sidecarTag, flagdTag string
		status               metav1.ConditionStatus
		reason, message      string
	}{
		{"v0.16.0", "", metav1.ConditionTrue, v1beta1.ReasonSupportedFlagdVersion,
			"flagd v0.16.0 (--sidecar-tag) is a release flagplane vouches for, and it takes everything this Flagd asks for"},
		{"v0.16.0", "v0.16.1", metav1.ConditionTrue, v1beta1.ReasonSupportedFlagdVersion,
			"flagd v0.16.1 (--flagd-tag) is a release flagplane vouches for, and it takes everything this Flagd asks for"},
		{"v0.16.0", "v0.18.0", metav1.ConditionFalse, v1beta1.ReasonUnsupportedFlagdVersion,
			"flagd v0.18.0 (--flagd-tag) is not a flagd release flagplane vouches for (every flagd release from v0.10.0 to v0.16.1): " +
				"flagplane writes the arguments, env vars and --sources of flagd v0.16.0, and cannot tell whether that image takes them"},
		{"v0.15.4", "", metav1.ConditionFalse, v1beta1.ReasonUnsupportedSettings,
			`flagd v0.15.4 (--sidecar-tag) cannot take what this Flagd asks for, which its flagd goes without: sources[0] "flags": ` +
				"takes no --sources field headers (it came in v0.15.6), which carries the sync server's credential for namespace shop"},
	} {
		t.Run(tc.sidecarTag+"/"+tc.flagdTag, func(t *testing.T) {
			g := NewWithT(t)
			o := goldenFlagdOptions()
			o.Injection.Sidecar.Tag, o.Tag = tc.sidecarTag, tc.flagdTag
			objs := Desired(v, key, o)
			st := DesiredStatus(fd, objs, Children{InPlace: map[string]bool{}})
			c := meta.FindStatusCondition(st.Conditions, v1beta1.ConditionFlagdVersionSupported)
			g.Expect(c).NotTo(BeNil())
			g.Expect([]string{string(c.Status), c.Reason, c.Message}).To(Equal([]string{string(tc.status), tc.reason, tc.message}))
		})
	}
}
