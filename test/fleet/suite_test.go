package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/flagplane/flagplane/api"
	"github.com/flagplane/flagplane/cmd/manager/app"
	fleethub "github.com/flagplane/flagplane/controllers/fleet"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/operator"
)

func TestFleet(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Fleet: a hub places FeatureFlags onto member clusters of the inventory")
}

const (
	inventoryNS = "fleet-system"
	// teamA is granted to every member; teamB to none.
	teamA = "team-a"
	teamB = "team-b"
)

// memberCluster is one member: a control plane of its own, running
// flagplane, reached by the hub through a forwarder that a spec can cut.
type memberCluster struct {
	name string
	cp   *controlplane.ControlPlane
	op   *operator.Operator
	fwd  *forwarder
	env  string
}

var (
	root    string
	hub     *controlplane.ControlPlane
	hubC    client.Client
	members []*memberCluster
	scheme  *runtime.Scheme
	// hubAccess is the hub's access provider configuration; stopHub stops
	// the running hub manager.
	hubAccess *access.Config
	stopHub   func()
)

// startHub starts the hub's manager, with flagplane's fleet controllers,
// and returns what stops it.
func startHub() func() {
	mgr, err := ctrl.NewManager(hub.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	Expect(err).NotTo(HaveOccurred())
	_, err = fleethub.Add(mgr, fleethub.Options{InventoryNamespace: inventoryNS, Access: hubAccess,
		Heartbeat: time.Second, ProbeTimeout: time.Second})
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	return func() {
		once.Do(func() { cancel(); Expect(<-done).To(Succeed()) })
	}
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	// A member is probed every second with a second's timeout: a cut or a
	// rejoin shows within a few.
	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	SetDefaultConsistentlyPollingInterval(250 * time.Millisecond)
	var err error
	root, err = filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())
	scheme, err = api.NewScheme()
	Expect(err).NotTo(HaveOccurred())
	Expect(cpv1alpha1.AddToScheme(scheme)).To(Succeed())

	inventoryCRDs := moduleDir("sigs.k8s.io/cluster-inventory-api") + "/config/crd/bases"
	hub, err = controlplane.Start(ctx, controlplane.Options{RootDir: root, Log: GinkgoWriter, NoControllerManager: true,
		CRDDirectoryPaths: []string{filepath.Join(root, "config", "fleet", "crd"), inventoryCRDs}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(hub.Stop()).To(Succeed()) })
	hubC, err = client.New(hub.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	for _, ns := range []string{inventoryNS, teamA, teamB} {
		Expect(hubC.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}

	plugin := filepath.Join(GinkgoT().TempDir(), "secretreader")
	out, err := exec.Command("go", "build", "-o", plugin,
		"sigs.k8s.io/cluster-inventory-api/plugins/secretreader/cmd/plugin").CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))

	for _, m := range []struct{ name, env string }{{"dev", "dev"}, {"prod", "prod"}} {
		members = append(members, startMember(ctx, m.name, m.env))
	}

	// The access provider: the inventory's own secretreader plugin reads
	// the member's token from a Secret beside its ClusterProfile, with a
	// kubeconfig of the hub whose namespace is the inventory's.
	acc := access.New([]access.Provider{{Name: "secretreader", ExecConfig: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1", Command: plugin, ProvideClusterInfo: true,
		Env: []clientcmdapi.ExecEnvVar{{Name: "KUBECONFIG", Value: hubKubeconfig()}}, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}})
	hubAccess = acc
	stopHub = startHub()
	DeferCleanup(func() { stopHub() })

	// Every member is granted team-a; none is granted team-b.
	Expect(hubC.Create(ctx, grant("team-a-everywhere", []string{teamA}, nil))).To(Succeed())
	for _, m := range members {
		registerMember(ctx, m)
	}
})

// startMember starts a control plane running flagplane, and sets up the
// hub's identity on it as config/fleet/member says: the ServiceAccount
// and the admission policy, and the Role in team-a only.
func startMember(ctx context.Context, name, env string) *memberCluster {
	cp, err := controlplane.Start(ctx, controlplane.Options{RootDir: root, Log: GinkgoWriter,
		WebhookInstallOptions: operator.WebhookInstallOptions(root)})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(cp.Stop()).To(Succeed()) })
	op, err := operator.Start(ctx, cp, operator.Options{Dir: GinkgoT().TempDir(), Configure: func(o *app.Options) {
		o.ConfirmDelivery = true
		o.Registry = prometheus.NewRegistry() // one manager per member in this process
	}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(op.Stop()).To(Succeed()) })
	for _, ns := range []string{teamA, teamB} {
		Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	out, err := cp.Kubectl("apply", "-f", filepath.Join(root, "config", "fleet", "member", "identity.yaml"))
	Expect(err).NotTo(HaveOccurred(), out)
	out, err = cp.Kubectl("apply", "-n", teamA, "-f", filepath.Join(root, "config", "fleet", "member", "role.yaml"))
	Expect(err).NotTo(HaveOccurred(), out)
	u, err := url.Parse(cp.Config.Host)
	Expect(err).NotTo(HaveOccurred())
	fwd, err := newForwarder(u.Host)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(fwd.Close)
	return &memberCluster{name: name, cp: cp, op: op, fwd: fwd, env: env}
}

// registerMember writes the member's ClusterProfile (reached through its
// forwarder) and the Secret with a token of the hub's identity there.
func registerMember(ctx context.Context, m *memberCluster) {
	writeToken(ctx, m)
	cp := &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: m.name, Namespace: inventoryNS,
		Labels: map[string]string{"env": m.env, "x-k8s.io/cluster-manager": "flagplane-test"}},
		Spec: cpv1alpha1.ClusterProfileSpec{DisplayName: m.name, ClusterManager: cpv1alpha1.ClusterManager{Name: "flagplane-test"}}}
	Expect(hubC.Create(ctx, cp)).To(Succeed())
	ext, err := json.Marshal(map[string]string{"clusterName": m.name})
	Expect(err).NotTo(HaveOccurred())
	cp.Status.AccessProviders = []cpv1alpha1.AccessProvider{{Name: "secretreader", Cluster: clientcmdv1.Cluster{
		Server: "https://" + m.fwd.Addr(), CertificateAuthorityData: m.cp.Config.CAData,
		Extensions: []clientcmdv1.NamedExtension{{Name: "client.authentication.k8s.io/exec",
			Extension: runtime.RawExtension{Raw: ext}}}}}}
	cp.Status.Conditions = []metav1.Condition{}
	Expect(hubC.Status().Update(ctx, cp)).To(Succeed())
}

// writeToken puts a fresh token of the member's flagplane-fleet
// ServiceAccount into the hub's Secret for the member.
func writeToken(ctx context.Context, m *memberCluster) {
	cs, err := kubernetes.NewForConfig(m.cp.Config)
	Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts("flagplane-fleet").CreateToken(ctx, "flagplane-fleet",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600))}},
		metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: m.name, Namespace: inventoryNS},
		Data: map[string][]byte{"token": []byte(tr.Status.Token)}}
	if err := hubC.Create(ctx, sec); err != nil {
		Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
		Expect(hubC.Update(ctx, sec)).To(Succeed())
	}
}

// hubKubeconfig writes an admin kubeconfig of the hub whose namespace is
// the inventory's, for the secretreader plugin.
func hubKubeconfig() string {
	cfg, err := clientcmd.LoadFromFile(hub.KubeconfigPath)
	Expect(err).NotTo(HaveOccurred())
	for _, c := range cfg.Contexts {
		c.Namespace = inventoryNS
	}
	path := filepath.Join(GinkgoT().TempDir(), "hub.kubeconfig")
	Expect(clientcmd.WriteToFile(*cfg, path)).To(Succeed())
	return path
}

func moduleDir(module string) string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	Expect(err).NotTo(HaveOccurred())
	dir := strings.TrimSpace(string(out))
	_, err = os.Stat(dir)
	Expect(err).NotTo(HaveOccurred(), fmt.Sprintf("module %s", module))
	return dir
}

func ptrTo[T any](v T) *T { return &v }
