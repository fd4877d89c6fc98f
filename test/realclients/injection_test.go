package realclients

import (
	"encoding/json"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
)

// A source entry with provider flagd-proxy makes the injected sidecar sync
// from the sync server: flagd runs here with the very arguments the Pod
// webhook injects (injection.Desired, with the sync server's
// address and the namespace-token headers the manager configures), only its
// ports moved to free ones.
var _ = Describe("the sidecar injected for a flagd-proxy source", func() {
	It("syncs its flag set from the sync server, and follows an edit", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ff := checkoutFlags(ns, "checkout", "off")
		src := webSource(ns, v1beta1.SyncProviderFlagdProxy)
		create(ctx, ff, src, deployment(ns, "web"))

		opts := injection.DefaultOptions()
		opts.SyncServer = syncAddr
		opts.SyncServerHeaders = namespaceTokens.HeadersFor
		web := topology.WorkloadKey(topology.KindDeployment, ns, "web")
		var inj *injection.Injection
		Eventually(func() *injection.Injection {
			inj = injection.Desired(op.Controller.Topology().Snapshot(), web, opts)
			return inj
		}).Should(HaveField("Sidecar", Not(BeNil())), "the graph never gave web a sidecar")
		Expect(inj.Warnings).To(BeEmpty())

		args := inj.Sidecar.Args
		i := slices.Index(args, "--sources")
		Expect(i).To(BeNumerically(">", 0))
		var sources []map[string]any
		Expect(json.Unmarshal([]byte(args[i+1]), &sources)).To(Succeed())
		Expect(sources).To(ConsistOf(HaveKeyWithValue("uri", syncAddr)))

		f := startFlagd(withoutPorts(args)...)
		Eventually(f.resolve("Boolean", "new-checkout", nil)).Should(Equal(evaluation{Value: false, Variant: "off", Reason: "STATIC"}))

		By("editing the FeatureFlag")
		setDefault(ctx, ff, "on")
		Eventually(f.resolve("Boolean", "new-checkout", nil)).Should(Equal(evaluation{Value: true, Variant: "on", Reason: "STATIC"}))
	})
})

// withoutPorts drops the subcommand and the port flags of a flagd command
// line, for startFlagd to set free ones.
func withoutPorts(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "start":
		case "--port", "--management-port", "--ofrep-port", "--sync-port":
			i++
		default:
			out = append(out, args[i])
		}
	}
	return out
}
