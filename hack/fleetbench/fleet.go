package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/flagplane/flagplane/api/fleet/v1alpha1"
	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/hack/fleetbench/nsfleet"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/operator"
)

const (
	inventoryNS = "fleet-system"
	teamA       = "team-a"
	// selectLabel is on every ClusterProfile of the bench, and the
	// placement selects by it.
	selectLabel = "fleetbench.flagplane.dev/member"
)

// fleet is one size's hub and members; stop ends every part of it that
// was started, in reverse.
type fleet struct {
	root, dir string
	hub       *controlplane.ControlPlane
	hubC      client.Client
	// members are the real members; with sim, members[0] is the shared
	// member and clusters the virtual ones.
	members  []*member
	clusters []string
	proc     *hubProc

	mu    sync.Mutex
	stops []func() error
}

type member struct {
	name string
	cp   *controlplane.ControlPlane
	op   *operator.Operator
	c    client.Client
}

func (f *fleet) onStop(fn func() error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stops = append(f.stops, fn)
}

func (f *fleet) stop() {
	for i := len(f.stops) - 1; i >= 0; i-- {
		if err := f.stops[i](); err != nil {
			progress("stopping: %v", err)
		}
	}
	f.stops = nil
}

func unlimited(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	return cfg
}

// startHub starts the hub's control plane, with the fleet's and the
// inventory's CRDs, and its namespaces.
func (f *fleet) startHub(ctx context.Context) error {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-inventory-api").Output()
	if err != nil {
		return fmt.Errorf("finding the cluster-inventory-api module: %w", err)
	}
	inventoryCRDs := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "bases")
	f.hub, err = controlplane.Start(ctx, controlplane.Options{RootDir: f.root, Log: io.Discard, NoControllerManager: true,
		CRDDirectoryPaths: []string{filepath.Join(f.root, "config", "fleet", "crd"), inventoryCRDs}})
	if err != nil {
		return err
	}
	f.onStop(f.hub.Stop)
	if f.hubC, err = client.New(unlimited(f.hub.Config), client.Options{Scheme: scheme}); err != nil {
		return err
	}
	for _, ns := range []string{inventoryNS, teamA} {
		if err := f.hubC.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	grant := &fleetv1alpha1.FleetGrant{ObjectMeta: metav1.ObjectMeta{Name: "team-a-everywhere", Namespace: inventoryNS},
		Spec: fleetv1alpha1.FleetGrantSpec{Namespaces: []string{teamA}}}
	return f.hubC.Create(ctx, grant)
}

// startMember starts a control plane running flagplane (admission on,
// delivery confirmed), as test/fleet does, with namespaces.
func (f *fleet) startMember(ctx context.Context, name string, namespaces []string) (*member, error) {
	cp, err := controlplane.Start(ctx, controlplane.Options{RootDir: f.root, Log: io.Discard, NoControllerManager: true,
		WebhookInstallOptions: operator.WebhookInstallOptions(f.root)})
	if err != nil {
		return nil, err
	}
	f.onStop(cp.Stop)
	op, err := operator.Start(ctx, cp, operator.Options{Dir: filepath.Join(f.dir, name), Configure: func(o *app.Options) {
		o.ConfirmDelivery = true
		o.Registry = prometheus.NewRegistry() // one manager per member in this process
	}})
	if err != nil {
		return nil, err
	}
	f.onStop(op.Stop)
	m := &member{name: name, cp: cp, op: op}
	if m.c, err = client.New(unlimited(cp.Config), client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, ns := range namespaces {
		g.Go(func() error { return m.c.Create(gctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	}
	return m, g.Wait()
}

// startReal starts n real members, two at a time, each with the hub's
// identity of config/fleet/member, a token of it in a hub Secret and a
// ClusterProfile whose access provider is the secretreader plugin.
func (f *fleet) startReal(ctx context.Context, n int, plugin string) error {
	f.members = make([]*member, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(2)
	for i := range n {
		g.Go(func() error {
			m, err := f.startMember(gctx, fmt.Sprintf("member-%02d", i), []string{teamA})
			if err != nil {
				return err
			}
			f.members[i] = m
			return f.register(gctx, m)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, m := range f.members {
		f.clusters = append(f.clusters, m.name)
	}
	pk, err := f.pluginKubeconfig()
	if err != nil {
		return err
	}
	return f.startHubProc(hubConfig{Kubeconfig: f.hub.KubeconfigPath, Plugin: plugin, PluginKubeconfig: pk})
}

func (f *fleet) register(ctx context.Context, m *member) error {
	for _, args := range [][]string{
		{"apply", "-f", filepath.Join(f.root, "config", "fleet", "member", "identity.yaml")},
		{"apply", "-n", teamA, "-f", filepath.Join(f.root, "config", "fleet", "member", "role.yaml")},
	} {
		if out, err := m.cp.Kubectl(args...); err != nil {
			return fmt.Errorf("%s: %w: %s", m.name, err, out)
		}
	}
	cs, err := kubernetes.NewForConfig(m.cp.Config)
	if err != nil {
		return err
	}
	tr, err := cs.CoreV1().ServiceAccounts("flagplane-fleet").CreateToken(ctx, "flagplane-fleet",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(6 * 3600))}},
		metav1.CreateOptions{})
	if err != nil {
		return err
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: m.name, Namespace: inventoryNS},
		Data: map[string][]byte{"token": []byte(tr.Status.Token)}}
	if err := f.hubC.Create(ctx, sec); err != nil {
		return err
	}
	ext, err := json.Marshal(map[string]string{"clusterName": m.name})
	if err != nil {
		return err
	}
	return f.profile(ctx, m.name, []cpv1alpha1.AccessProvider{{Name: "secretreader", Cluster: clientcmdv1.Cluster{
		Server: m.cp.Config.Host, CertificateAuthorityData: m.cp.Config.CAData,
		Extensions: []clientcmdv1.NamedExtension{{Name: "client.authentication.k8s.io/exec",
			Extension: runtime.RawExtension{Raw: ext}}}}}})
}

// profile writes a labelled ClusterProfile, with access providers in its
// status when there are any.
func (f *fleet) profile(ctx context.Context, name string, providers []cpv1alpha1.AccessProvider) error {
	cp := &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: inventoryNS,
		Labels: map[string]string{selectLabel: "true", "x-k8s.io/cluster-manager": "fleetbench"}},
		Spec: cpv1alpha1.ClusterProfileSpec{DisplayName: name, ClusterManager: cpv1alpha1.ClusterManager{Name: "fleetbench"}}}
	if err := f.hubC.Create(ctx, cp); err != nil {
		return err
	}
	if len(providers) == 0 {
		return nil
	}
	cp.Status.AccessProviders = providers
	cp.Status.Conditions = []metav1.Condition{}
	return f.hubC.Status().Update(ctx, cp)
}

// pluginKubeconfig is the hub's admin kubeconfig in the inventory's
// namespace, for the secretreader plugin.
func (f *fleet) pluginKubeconfig() (string, error) {
	cfg, err := clientcmd.LoadFromFile(f.hub.KubeconfigPath)
	if err != nil {
		return "", err
	}
	for _, c := range cfg.Contexts {
		c.Namespace = inventoryNS
	}
	path := filepath.Join(f.dir, "hub-inventory.kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// startSim starts one shared member with a namespace per virtual cluster,
// and n ClusterProfiles on the hub, and the hub process with the
// namespace-mapping engine. The engine uses the member's admin
// credentials.
func (f *fleet) startSim(ctx context.Context, n int) error {
	var namespaces []string
	for i := range n {
		name := fmt.Sprintf("sim-%04d", i)
		f.clusters = append(f.clusters, name)
		namespaces = append(namespaces, simNamespace(name))
	}
	m, err := f.startMember(ctx, "shared", namespaces)
	if err != nil {
		return err
	}
	f.members = []*member{m}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, name := range f.clusters {
		g.Go(func() error { return f.profile(gctx, name, nil) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return f.startHubProc(hubConfig{Kubeconfig: f.hub.KubeconfigPath, SimKubeconfig: m.cp.KubeconfigPath, SimClusters: f.clusters})
}

func (f *fleet) startHubProc(hc hubConfig) error {
	var err error
	if f.proc, err = startHub(f.dir, hc); err != nil {
		return err
	}
	f.onStop(f.proc.stop)
	return nil
}

// hubLogTail is the end of the hub process's log, for an error.
func (f *fleet) hubLogTail() string {
	if f.proc == nil {
		return ""
	}
	return tailFile(f.proc.log, 30)
}

// simNamespace is the shared member's namespace of a virtual cluster's
// team-a.
func simNamespace(cluster string) string { return nsfleet.NamespaceOf(cluster, teamA) }
