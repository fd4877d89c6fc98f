// Package fleetenv runs a fleet for tests, benchmarks and the demo: a hub
// control plane with the fleet's CRDs and the inventory's, member control
// planes each running flagplane, the hub's identity on each member as
// config/fleet/member makes it, ClusterProfiles whose access provider is
// the inventory's own secretreader plugin, and the hub's manager.
//
// Each member is reached through a Forwarder, so that a caller can cut it
// off from the hub alone. Everything started is stopped by Stop, in the
// reverse order.
package fleetenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/flagplane/flagplane/api"
	"github.com/flagplane/flagplane/cmd/manager/app"
	fleethub "github.com/flagplane/flagplane/controllers/fleet"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/operator"
	"github.com/flagplane/flagplane/test/realnode"
)

// InventoryNamespace holds the ClusterProfiles, the FleetGrants and the
// Secrets the secretreader plugin reads.
const InventoryNamespace = "fleet-system"

// HubIdentity is the member's name for the hub, as config/fleet/member
// makes it.
const HubIdentity = "system:serviceaccount:flagplane-fleet:flagplane-fleet"

// HubServiceAccount is the hub's own identity on its cluster, as
// config/fleet/hub makes it: the hub's manager and its exec plugin run as
// it (by impersonation), so that every spec runs under that RBAC.
const HubServiceAccount = "system:serviceaccount:flagplane-system:flagplane-fleet-hub"

// Options configure Start.
type Options struct {
	// Root is the repository root.
	Root string
	// Log receives the control planes' progress.
	Log io.Writer
	// Members are started in this order.
	Members []MemberSpec
	// Namespaces are created on the hub and in every member.
	Namespaces []string
	// Heartbeat and ProbeTimeout of the hub (1 s each when zero).
	Heartbeat, ProbeTimeout time.Duration
	// Dir holds the plugin, the hub's kubeconfig for it, and the members'
	// files; a temporary folder, removed by Stop, when empty.
	Dir string

	// The options below are for a benchmark (hack/fleetbench); their zero
	// values are what the tests and the demo run with.

	// Parallel is how many members are started at once (one when zero).
	Parallel int
	// Direct: the ClusterProfiles name the members' API servers
	// themselves, with no Forwarder (Member.Fwd is nil), so that no
	// traffic of the hub passes through the caller's process.
	Direct bool
	// NoControllerManager: the members other than the real node run no
	// kube-controller-manager.
	NoControllerManager bool
	// Unthrottled: Client has no client-side rate limit, for a caller
	// that writes many objects.
	Unthrottled bool
}

// MemberSpec is one member cluster: its ClusterProfile's name and labels,
// and the namespaces where the hub's Role is applied.
type MemberSpec struct {
	Name    string
	Labels  map[string]string
	Granted []string
	// RealNode makes the member the test's real node (kubelet, containerd,
	// CNI): flagplane installed from its chart and image, flagd run by the
	// kubelet, with the kubelet's syncFrequency at 5 s. It needs what
	// `make realnode` builds, and root.
	RealNode bool
	// Unregistered: the member is started and prepared, but gets no
	// ClusterProfile and no token Secret on the hub; the caller reaches
	// it its own way.
	Unregistered bool
	// NoFlagplane: the member runs no flagplane (no manager, no
	// webhooks); the caller stands in for it (a benchmark isolating the
	// hub). Not for the real node.
	NoFlagplane bool
}

// Member is a running member cluster.
type Member struct {
	MemberSpec
	// Config and Client are the member's admin's.
	Config *rest.Config
	Client client.Client
	// CP and Op are the control plane and the in-process flagplane of a
	// member that is not the real node.
	CP *controlplane.ControlPlane
	Op *operator.Operator
	// Node is the real node of a RealNode member.
	Node *realnode.Cluster
	Fwd  *Forwarder
}

// Kubectl runs kubectl against the member as its admin.
func (m *Member) Kubectl(args ...string) (string, error) {
	if m.Node != nil {
		return m.Node.Kubectl(args...)
	}
	return m.CP.Kubectl(args...)
}

// Fleet is a running hub and its members.
type Fleet struct {
	Hub     *controlplane.ControlPlane
	Client  client.Client
	Scheme  *runtime.Scheme
	Members []*Member
	// Access is the hub's access provider configuration, made by
	// AccessConfig of Plugin and HubKubeconfig.
	Access *access.Config
	// Plugin is the inventory's secretreader exec plugin, built for this
	// fleet.
	Plugin string
	// HubKubeconfig is a kubeconfig of the hub as HubServiceAccount (by
	// impersonation), in the inventory's namespace: the plugin reads the
	// token Secrets with it, and a hub run in a process of its own can run
	// with it.
	HubKubeconfig string

	opts    Options
	mu      sync.Mutex // guards cleanup
	cleanup []func() error
	stopHub func() error
}

// AccessConfig is the hub's access provider configuration: the
// secretreader plugin, run with the kubeconfig, which is the hub's.
func AccessConfig(plugin, kubeconfig string) *access.Config {
	return access.New([]access.Provider{{Name: "secretreader", ExecConfig: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1", Command: plugin, ProvideClusterInfo: true,
		Env:             []clientcmdapi.ExecEnvVar{{Name: "KUBECONFIG", Value: kubeconfig}},
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}})
}

// Start starts the hub's control plane and every member, and registers
// the members in the inventory. The hub's manager is started by StartHub,
// or by the caller its own way (with Access, or Plugin and HubKubeconfig).
// On error what was started is stopped.
func Start(ctx context.Context, o Options) (f *Fleet, err error) {
	f = &Fleet{opts: o}
	defer func() {
		if err != nil {
			_ = f.Stop()
			f = nil
		}
	}()
	if f.opts.Dir == "" {
		dir, err := os.MkdirTemp("", "flagplane-fleet-")
		if err != nil {
			return nil, err
		}
		f.opts.Dir = dir
		f.onStop(func() error { return os.RemoveAll(dir) })
	}
	if err := f.startHubControlPlane(ctx); err != nil {
		return nil, err
	}
	if f.Plugin, err = f.buildPlugin(); err != nil {
		return nil, err
	}
	if f.HubKubeconfig, err = f.hubKubeconfig(); err != nil {
		return nil, err
	}
	f.Access = AccessConfig(f.Plugin, f.HubKubeconfig)
	return f, f.startMembers(ctx)
}

// startMembers starts and registers the members, Options.Parallel at a
// time, keeping their order in Members.
func (f *Fleet) startMembers(ctx context.Context) error {
	f.Members = make([]*Member, len(f.opts.Members))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, f.opts.Parallel))
	for i, spec := range f.opts.Members {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err // another member failed: start no more
			}
			start := f.startMember
			if spec.RealNode {
				start = f.startRealMember
			}
			m, err := start(gctx, spec)
			if err != nil {
				return fmt.Errorf("member %s: %w", spec.Name, err)
			}
			f.Members[i] = m
			if spec.Unregistered {
				return nil
			}
			if err := f.Register(gctx, m); err != nil {
				return fmt.Errorf("registering member %s: %w", spec.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

func (f *Fleet) onStop(fn func() error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanup = append(f.cleanup, fn)
}

// Stop stops the hub's manager, the members and the control planes.
func (f *Fleet) Stop() error {
	var errs []error
	if f.stopHub != nil {
		errs = append(errs, f.StopHub())
	}
	for i := len(f.cleanup) - 1; i >= 0; i-- {
		errs = append(errs, f.cleanup[i]())
	}
	f.cleanup = nil
	return errors.Join(errs...)
}

func (f *Fleet) startHubControlPlane(ctx context.Context) error {
	scheme, err := api.NewScheme()
	if err != nil {
		return err
	}
	if err := cpv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	f.Scheme = scheme
	inventory, err := moduleDir(f.opts.Root, "sigs.k8s.io/cluster-inventory-api")
	if err != nil {
		return err
	}
	hub, err := controlplane.Start(ctx, controlplane.Options{RootDir: f.opts.Root, Log: f.opts.Log, NoControllerManager: true,
		CRDDirectoryPaths: []string{filepath.Join(f.opts.Root, "config", "fleet", "crd"), filepath.Join(inventory, "config", "crd", "bases")}})
	if err != nil {
		return fmt.Errorf("the hub: %w", err)
	}
	f.Hub = hub
	f.onStop(hub.Stop)
	cfg := hub.Config
	if f.opts.Unthrottled {
		cfg = rest.CopyConfig(cfg)
		cfg.QPS = -1
	}
	if f.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if err := createNamespaces(ctx, f.Client, append([]string{InventoryNamespace}, f.opts.Namespaces...)); err != nil {
		return err
	}
	hubDir := filepath.Join(f.opts.Root, "config", "fleet", "hub")
	for _, file := range []string{"namespace.yaml", "rbac.yaml"} {
		if out, err := hub.Kubectl("apply", "-f", filepath.Join(hubDir, file)); err != nil {
			return fmt.Errorf("applying config/fleet/hub/%s: %w: %s", file, err, out)
		}
	}
	return nil
}

// StartHub starts the hub's manager with flagplane's fleet controllers, as
// the hub's ServiceAccount.
func (f *Fleet) StartHub() error {
	asHub := rest.CopyConfig(f.Hub.Config)
	asHub.Impersonate = rest.ImpersonationConfig{UserName: HubServiceAccount}
	mgr, err := ctrl.NewManager(asHub, ctrl.Options{Scheme: f.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: fleethub.CacheOptions(InventoryNamespace)})
	if err != nil {
		return err
	}
	hb, pt := f.opts.Heartbeat, f.opts.ProbeTimeout
	if hb == 0 {
		hb = time.Second
	}
	if pt == 0 {
		pt = time.Second
	}
	if _, err := fleethub.Add(mgr, fleethub.Options{InventoryNamespace: InventoryNamespace, Access: f.Access,
		Heartbeat: hb, ProbeTimeout: pt}); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	var stopErr error
	f.stopHub = func() error {
		once.Do(func() { cancel(); stopErr = <-done })
		return stopErr
	}
	return nil
}

// StopHub stops the hub's manager (the hub's API server keeps running).
func (f *Fleet) StopHub() error {
	if f.stopHub == nil {
		return nil
	}
	err := f.stopHub()
	f.stopHub = nil
	return err
}

// startMember starts a control plane running flagplane, and sets up the
// hub's identity on it as config/fleet/member says: the ServiceAccount and
// the admission policy, and the Role in the granted namespaces only.
func (f *Fleet) startMember(ctx context.Context, spec MemberSpec) (*Member, error) {
	cpo := controlplane.Options{RootDir: f.opts.Root, Log: f.opts.Log, NoControllerManager: f.opts.NoControllerManager}
	if !spec.NoFlagplane {
		cpo.WebhookInstallOptions = operator.WebhookInstallOptions(f.opts.Root)
	}
	cp, err := controlplane.Start(ctx, cpo)
	if err != nil {
		return nil, err
	}
	f.onStop(cp.Stop)
	if spec.NoFlagplane {
		m := &Member{MemberSpec: spec, CP: cp, Config: cp.Config, Client: cp.Client}
		return m, f.prepareMember(ctx, m)
	}
	dir, err := os.MkdirTemp(f.opts.Dir, spec.Name+"-")
	if err != nil {
		return nil, err
	}
	op, err := operator.Start(ctx, cp, operator.Options{Dir: dir, Configure: func(o *app.Options) {
		o.ConfirmDelivery = true
		o.Registry = prometheus.NewRegistry() // one manager per member in this process
	}})
	if err != nil {
		return nil, err
	}
	m := &Member{MemberSpec: spec, CP: cp, Op: op, Config: cp.Config, Client: cp.Client}
	f.onStop(func() error { return m.Op.Stop() })
	return m, f.prepareMember(ctx, m)
}

// startRealMember starts the real node and installs flagplane on it from
// its chart, as a user does.
func (f *Fleet) startRealMember(ctx context.Context, spec MemberSpec) (*Member, error) {
	repo, tag, err := realnode.ChartImage(f.opts.Root)
	if err != nil {
		return nil, err
	}
	node, err := realnode.Start(ctx, realnode.Options{RootDir: f.opts.Root, Log: f.opts.Log, SyncFrequency: 5 * time.Second,
		Images: []realnode.Image{{Ref: repo + ":" + tag, Layout: filepath.Join(f.opts.Root, "dist", "image")}}})
	if err != nil {
		return nil, err
	}
	f.onStop(node.Stop)
	if out, err := node.InstallFlagplane(ctx, f.opts.Root); err != nil {
		return nil, fmt.Errorf("installing flagplane: %w: %s", err, out)
	}
	m := &Member{MemberSpec: spec, Node: node, Config: node.Config, Client: node.Client}
	return m, f.prepareMember(ctx, m)
}

// prepareMember creates the namespaces and sets up the hub's identity as
// config/fleet/member says: the ServiceAccount and the admission policy,
// and the Role in the granted namespaces only; then the Forwarder, unless
// Options.Direct.
func (f *Fleet) prepareMember(ctx context.Context, m *Member) error {
	if err := createNamespaces(ctx, m.Client, f.opts.Namespaces); err != nil {
		return err
	}
	memberDir := filepath.Join(f.opts.Root, "config", "fleet", "member")
	if out, err := m.Kubectl("apply", "-f", filepath.Join(memberDir, "identity.yaml")); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	for _, ns := range m.Granted {
		if out, err := m.Kubectl("apply", "-n", ns, "-f", filepath.Join(memberDir, "role.yaml")); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
	}
	if f.opts.Direct {
		return nil
	}
	u, err := url.Parse(m.Config.Host)
	if err != nil {
		return err
	}
	if m.Fwd, err = NewForwarder(u.Host); err != nil {
		return err
	}
	f.onStop(func() error { m.Fwd.Close(); return nil })
	return nil
}

// Register writes the member's ClusterProfile (reached through its
// Forwarder, or directly when it has none) and the Secret with a token of
// the hub's identity there.
func (f *Fleet) Register(ctx context.Context, m *Member) error {
	if err := f.WriteToken(ctx, m); err != nil {
		return err
	}
	labels := map[string]string{"x-k8s.io/cluster-manager": "flagplane-test"}
	for k, v := range m.Labels {
		labels[k] = v
	}
	cp := &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: InventoryNamespace, Labels: labels},
		Spec: cpv1alpha1.ClusterProfileSpec{DisplayName: m.Name, ClusterManager: cpv1alpha1.ClusterManager{Name: "flagplane-test"}}}
	if err := f.Client.Create(ctx, cp); err != nil {
		return err
	}
	ext, err := json.Marshal(map[string]string{"clusterName": m.Name})
	if err != nil {
		return err
	}
	ca := m.Config.CAData
	if len(ca) == 0 && m.Config.CAFile != "" {
		if ca, err = os.ReadFile(m.Config.CAFile); err != nil {
			return err
		}
	}
	server := m.Config.Host
	if m.Fwd != nil {
		server = "https://" + m.Fwd.Addr()
	}
	cp.Status.AccessProviders = []cpv1alpha1.AccessProvider{{Name: "secretreader", Cluster: clientcmdv1.Cluster{
		Server: server, CertificateAuthorityData: ca,
		Extensions: []clientcmdv1.NamedExtension{{Name: "client.authentication.k8s.io/exec",
			Extension: runtime.RawExtension{Raw: ext}}}}}}
	cp.Status.Conditions = []metav1.Condition{}
	return f.Client.Status().Update(ctx, cp)
}

// WriteToken puts a fresh token of the member's flagplane-fleet
// ServiceAccount into the hub's Secret for the member.
func (f *Fleet) WriteToken(ctx context.Context, m *Member) error {
	cs, err := kubernetes.NewForConfig(m.Config)
	if err != nil {
		return err
	}
	expiry := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts("flagplane-fleet").CreateToken(ctx, "flagplane-fleet",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}},
		metav1.CreateOptions{})
	if err != nil {
		return err
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: InventoryNamespace},
		Data: map[string][]byte{"token": []byte(tr.Status.Token)}}
	if err := f.Client.Create(ctx, sec); err != nil {
		if client.IgnoreAlreadyExists(err) != nil {
			return err
		}
		return f.Client.Update(ctx, sec)
	}
	return nil
}

// buildPlugin builds the inventory's secretreader exec plugin.
func (f *Fleet) buildPlugin() (string, error) {
	plugin := filepath.Join(f.opts.Dir, "secretreader")
	cmd := exec.Command("go", "build", "-o", plugin, "sigs.k8s.io/cluster-inventory-api/plugins/secretreader/cmd/plugin")
	cmd.Dir = f.opts.Root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the secretreader plugin: %w: %s", err, out)
	}
	return plugin, nil
}

// hubKubeconfig writes a kubeconfig of the hub, as the hub's
// ServiceAccount, whose namespace is the inventory's, for the secretreader
// plugin, which runs as the hub.
func (f *Fleet) hubKubeconfig() (string, error) {
	cfg, err := clientcmd.LoadFromFile(f.Hub.KubeconfigPath)
	if err != nil {
		return "", err
	}
	for _, c := range cfg.Contexts {
		c.Namespace = InventoryNamespace
	}
	for _, u := range cfg.AuthInfos {
		u.Impersonate = HubServiceAccount
	}
	path := filepath.Join(f.opts.Dir, "hub.kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

func createNamespaces(ctx context.Context, c client.Client, names []string) error {
	for _, ns := range names {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
			return err
		}
	}
	return nil
}

func moduleDir(root, module string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating module %s: %w", module, err)
	}
	dir := strings.TrimSpace(string(out))
	if _, err := os.Stat(dir); err != nil {
		return "", err
	}
	return dir, nil
}
