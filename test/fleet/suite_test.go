package fleet

import (
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flagplane/flagplane/test/fleetenv"
)

func TestFleet(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Fleet: a hub places FeatureFlags onto member clusters of the inventory")
}

const (
	inventoryNS = fleetenv.InventoryNamespace
	// teamA is granted to every member; teamB to none.
	teamA = "team-a"
	teamB = "team-b"
)

var (
	fl      *fleetenv.Fleet
	hubC    client.Client
	members []*fleetenv.Member
)

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	// A member is probed every second with a second's timeout: a cut or a
	// rejoin shows within a few.
	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	SetDefaultConsistentlyPollingInterval(250 * time.Millisecond)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())
	fl, err = fleetenv.Start(ctx, fleetenv.Options{Root: root, Log: GinkgoWriter, Dir: GinkgoT().TempDir(),
		Namespaces: []string{teamA, teamB},
		Members: []fleetenv.MemberSpec{
			{Name: "dev", Labels: map[string]string{"env": "dev"}, Granted: []string{teamA}},
			{Name: "prod", Labels: map[string]string{"env": "prod"}, Granted: []string{teamA}},
			// The real node: flagplane from its chart, flagd run by the
			// kubelet, so that Current there means flagd serves it.
			{Name: "staging", Labels: map[string]string{"env": "staging"}, Granted: []string{teamA}, RealNode: true},
		}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(fl.Stop()).To(Succeed()) })
	hubC, members = fl.Client, fl.Members
	Expect(fl.StartHub()).To(Succeed())
	// Every member is granted team-a; none is granted team-b.
	Expect(hubC.Create(ctx, grant("team-a-everywhere", []string{teamA}, nil))).To(Succeed())
}, NodeTimeout(10*time.Minute))
