package flagds

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/onsi/gomega"

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
		f, err := os.Open(in)
		if err != nil {
			t.Fatal(err)
		}
		topo := topology.New()
		if err := manifests.Load(topo, f); err != nil {
			t.Fatal(err)
		}
		f.Close()
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
