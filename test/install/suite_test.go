package install

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/operator"
)

func TestInstall(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Install")
}

var (
	cp       *controlplane.ControlPlane
	k8s      client.Client
	rootDir  string
	cliPath  string // the flagplane command, built from cmd/flagplane
	systemNS = "flagplane-system"
)

const (
	managerSA = "flagplane-manager"
	// teamNS is the namespace of config/namespaced.
	teamNS = "team-a"
)

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	rootDir, err = filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())
	cp, err = controlplane.Start(ctx, controlplane.Options{
		// The aggregation controller fills the built-in edit/view roles
		// from flagplane's aggregated ClusterRoles.
		Controllers: append(append([]string{}, controlplane.DefaultControllers...), "clusterrole-aggregation"),
		// Gateway API's ReferenceGrant, which the manager watches when installed.
		GatewayAPI: true,
		Log:        GinkgoWriter,
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(cp.Stop()).To(Succeed()) })
	k8s = cp.Client

	cliPath = filepath.Join(GinkgoT().TempDir(), "flagplane")
	build := exec.CommandContext(ctx, "go", "build", "-o", cliPath, "./cmd/flagplane")
	build.Dir = rootDir
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "building the flagplane command: %s", out)
}, NodeTimeout(10*time.Minute))

func init() {
	// Bounds, not expectations: every wait polls its real condition, and a
	// loaded 2-core machine (a control plane, managers, kubectl, other
	// suites) may take minutes where an idle one takes a second.
	SetDefaultEventuallyTimeout(3 * time.Minute)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyDuration(3 * time.Second)
	SetDefaultConsistentlyPollingInterval(200 * time.Millisecond)
}

// kubectl runs kubectl against the control plane and fails the spec if it fails.
func kubectl(args ...string) string {
	GinkgoHelper()
	out, err := cp.Kubectl(args...)
	Expect(err).NotTo(HaveOccurred())
	return out
}

// serviceAccount is the user name of a ServiceAccount.
func serviceAccount(ns, name string) string { return "system:serviceaccount:" + ns + ":" + name }

// canI asks the API server, through `kubectl auth can-i --as`, whether user
// may do what args say (verb, resource, then -n/-A/--subresource).
func canI(user string, args ...string) bool {
	GinkgoHelper()
	full := append([]string{"auth", "can-i", "--as=" + user}, args...)
	out, err := cp.Kubectl(full...)
	answer := strings.TrimSpace(out)
	if err != nil && answer != "no" {
		Fail(fmt.Sprintf("kubectl auth can-i %s: %v", strings.Join(args, " "), err))
	}
	Expect(answer).To(Or(Equal("yes"), Equal("no")), "kubectl auth can-i %s answered %q", strings.Join(args, " "), out)
	return answer == "yes"
}

// newNamespace creates a namespace for a spec, deleted after it.
func newNamespace(ctx context.Context, prefix string) string {
	GinkgoHelper()
	name, err := cp.NewNamespace(ctx, prefix)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		ns := &corev1.Namespace{}
		ns.Name = name
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, ns))).To(Succeed())
	})
	return name
}

// impersonating is an admin rest.Config turned into the given ServiceAccount:
// what a manager Pod running as it would be allowed.
func impersonating(ns, sa string) *rest.Config {
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: serviceAccount(ns, sa),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	return cfg
}

// clientAs is a client with the given rest.Config (e.g. impersonating).
func clientAs(cfg *rest.Config) client.Client {
	GinkgoHelper()
	c, err := client.New(cfg, client.Options{Scheme: cp.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// newServiceAccount creates a ServiceAccount and returns a token of it,
// valid for the API server's own audience, as `kubectl create token` gives.
func newServiceAccount(ctx context.Context, ns, name string) string {
	GinkgoHelper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	Expect(k8s.Create(ctx, sa)).To(Succeed())
	cs, err := kubernetes.NewForConfig(cp.Config)
	Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// userKubeconfig writes a kubeconfig for a user (client certificate) of the
// control plane, in no group but system:authenticated.
func userKubeconfig(name string) string {
	GinkgoHelper()
	user, err := cp.Env.ControlPlane.AddUser(envtest.User{Name: name}, nil)
	Expect(err).NotTo(HaveOccurred())
	b, err := user.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(GinkgoT().TempDir(), name+".kubeconfig")
	Expect(os.WriteFile(path, b, 0o600)).To(Succeed())
	return path
}

// metricsClient reads the manager's secure metrics server, whose certificate
// is self-signed (no --metrics-cert-dir), as a scraper configured with
// insecure_skip_verify would.
var metricsClient = &http.Client{Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the manager's self-signed certificate
}}

// bearerGet GETs url with a bearer token (none when empty) and returns the
// status code and body.
func bearerGet(url, token string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// runningManager is flagplane's manager run in the test process.
type runningManager struct {
	*operator.Operator
	// probeAddr is where its probes listen (bound when it was built).
	probeAddr string
}

// startManager builds the manager with opts and runs it until the spec
// ends. Its probes and metrics listen on ports it picks (port 0), on
// 127.0.0.1 and metricsHost: the ports are read from it, never chosen here
// and bound later (another process may take such a port meanwhile).
func startManager(cfg *rest.Config, metricsHost string, opts app.Options) *runningManager {
	GinkgoHelper()
	opts.MetricsBindAddress = net.JoinHostPort(metricsHost, "0")
	opts.HealthProbeBindAddress = "127.0.0.1:0"
	op, err := operator.Run(cfg, opts)
	Expect(err).NotTo(HaveOccurred())
	rm := &runningManager{Operator: op, probeAddr: op.Addresses().Health}
	DeferCleanup(func() { Expect(op.Stop()).To(Succeed()) })
	Expect(rm.probeAddr).NotTo(BeEmpty(), "the probes listen once the manager is built")
	return rm
}

// metricsAddr is where its metrics server listens, once it does (it starts
// when the caches have synced).
func (rm *runningManager) metricsAddr() string {
	GinkgoHelper()
	var addr string
	Eventually(func() string { addr = rm.Addresses().Metrics; return addr }).ShouldNot(BeEmpty(), "the metrics server listens")
	return addr
}

// syncAddr is where its sync server listens, once it does.
func (rm *runningManager) syncAddr() string {
	GinkgoHelper()
	var addr string
	Eventually(func() string { addr = rm.Addresses().Sync; return addr }).ShouldNot(BeEmpty(), "the sync server listens")
	return addr
}

// newRegistry is a metrics registry for a second manager in the process.
func newRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

// externalIP is an IPv4 address of this machine that is not loopback: the
// API server's service proxy refuses to forward to loopback addresses.
func externalIP() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
			return ipn.IP.String(), nil
		}
	}
	return "", errors.New("no non-loopback IPv4 address")
}
