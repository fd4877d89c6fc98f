package realinstall

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/realnode"
)

func TestRealInstall(t *testing.T) {
	RegisterFailHandler(Fail)
	// The API server's warnings (admission's) go to the spec's log.
	log.SetLogger(GinkgoLogr)
	RunSpecs(t, "flagplane installed from its chart on a real node")
}

// syncFrequencyEnv sets the kubelet's syncFrequency: a duration, or
// "default" for the kubelet's own (1m). The suite's is 5s, so that a
// ConfigMap edit reaches a mounted volume in seconds rather than a minute;
// docs/benchmarks.md has the figures with both.
const syncFrequencyEnv = "FLAGPLANE_REALNODE_SYNC_FREQUENCY"

func suiteSyncFrequency() time.Duration {
	switch v := os.Getenv(syncFrequencyEnv); v {
	case "":
		return 5 * time.Second
	case "default":
		return 0
	default:
		d, err := time.ParseDuration(v)
		if err != nil {
			panic(fmt.Sprintf("%s=%q: %v", syncFrequencyEnv, v, err))
		}
		return d
	}
}

const (
	systemNS    = "flagplane-system"
	releaseName = "flagplane"
)

var (
	cluster *realnode.Cluster
	k8s     client.Client
	root    string
	// managerImage is the chart's default image reference (its values'
	// repository at its appVersion), which the node's registry serves as
	// `make image` built it; upgradeImage is a second image of it.
	managerImage, upgradeImage, upgradeTag string
	// currentImage is the image the release runs now.
	currentImage string
)

var _ = BeforeSuite(func(ctx SpecContext) {
	// Gomega polls every 10 ms by default: 100 requests a second to a
	// pod's flagd or the API server, for as long as a wait lasts, on a
	// machine that also runs the node and another suite. A quarter second
	// is fine enough for waits counted in seconds.
	SetDefaultEventuallyPollingInterval(poll)
	SetDefaultConsistentlyPollingInterval(poll)
	var err error
	root, err = controlplane.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	repo, tag, err := realnode.ChartImage(root)
	Expect(err).NotTo(HaveOccurred())
	managerImage = repo + ":" + tag
	upgradeTag = tag + "-upgrade"
	upgradeImage = repo + ":" + upgradeTag
	currentImage = managerImage
	layout := filepath.Join(root, "dist", "image")
	jsClient, err := realnode.JSClientAt(realnode.JSClientImage, filepath.Join(root, "bin"))
	Expect(err).NotTo(HaveOccurred())
	hostile := buildHostile(root)
	cluster, err = realnode.Start(ctx, realnode.Options{
		Log:           GinkgoWriter,
		SyncFrequency: suiteSyncFrequency(),
		CRDDirs:       []string{controlplane.GatewayAPICRDDir(filepath.Join(root, "bin"))},
		Images: []realnode.Image{
			{Ref: managerImage, Layout: layout},
			{Ref: upgradeImage, Layout: layout, Labels: map[string]string{"dev.flagplane.test/upgrade": "1"}},
			jsClient,
			{Ref: hostileImage, Files: []realnode.ImageFile{{Src: hostile, Dst: "/hostile"}}, Entrypoint: []string{"/hostile"}, User: "65532:65532"},
		},
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() || os.Getenv("FLAGPLANE_KEEP_REALNODE") != "" {
			dumpState()
		}
		Expect(cluster.Stop()).To(Succeed())
	})
	k8s = cluster.Client

	By("helm install " + releaseName + " charts/flagplane, with the chart's defaults")
	began := time.Now()
	helm("install", releaseName, filepath.Join(root, "charts", "flagplane"), "--wait", "--timeout", "5m")
	for _, p := range waitForManagers(ctx, 2) {
		// Checked here, on the way up: a fault spec later (the API server
		// stopped) restarts a leader that cannot renew its Lease, as it should.
		Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero(), "replica %s crashed on its way up", p.Name)
	}
	AddReportEntry("helm install to 2 Ready replicas", time.Since(began).Round(time.Millisecond).String())
	// Ready replicas are not yet a Service that answers: kube-proxy
	// programs the endpoints a moment later, and until then the API server
	// cannot reach the validating webhook (failurePolicy Fail). A user's
	// first `kubectl apply` right after `helm install --wait` meets the
	// same moment.
	webhooksAnswer(ctx)
	AddReportEntry("helm install to the webhooks answering through their Service", time.Since(began).Round(time.Millisecond).String())
}, NodeTimeout(12*time.Minute))

func helm(args ...string) string {
	GinkgoHelper()
	out, err := cluster.Helm(args...)
	Expect(err).NotTo(HaveOccurred())
	return out
}

func kubectl(args ...string) string {
	GinkgoHelper()
	out, err := cluster.Kubectl(args...)
	Expect(err).NotTo(HaveOccurred())
	return out
}

// dumpState writes what a failed run needs to be understood: the pods, the
// events and the managers' logs.
func dumpState() {
	for _, args := range [][]string{
		{"get", "pods", "-A", "-o", "wide"},
		{"get", "events", "-A", "--sort-by=.lastTimestamp"},
		{"logs", "-n", systemNS, "-l", "app.kubernetes.io/name=flagplane", "--tail=80", "--prefix"},
	} {
		out, err := cluster.Kubectl(args...)
		fmt.Fprintf(GinkgoWriter, "$ kubectl %v\n%s%v\n", args, out, err)
	}
}

// webhooksAnswer waits until the API server reaches the validating webhook
// through its Service: a server-side dry run of a FeatureFlag is admitted.
func webhooksAnswer(ctx context.Context) {
	GinkgoHelper()
	Eventually(func() error {
		return k8s.Create(ctx, fixtures.FlagSet("default", "probe", "off"), client.DryRunAll)
	}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
}
