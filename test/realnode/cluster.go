package realnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api"
)

// Options configures Start.
type Options struct {
	// RootDir is the repository root; found from the working directory when empty.
	RootDir string
	// BinDir holds the binaries `make realnode` builds; <RootDir>/bin when empty.
	BinDir string
	// Log receives progress (os.Stderr when nil).
	Log io.Writer
	// SyncFrequency is the kubelet's syncFrequency, which bounds how late a
	// ConfigMap edit reaches a mounted volume. Zero: the kubelet's default (1m).
	SyncFrequency time.Duration
	// Images are served by the node's registry besides the default ones
	// (pause, flagd, busybox, the SDK client).
	Images []Image
	// CRDDirs are applied once the API server is up (e.g. Gateway API's).
	CRDDirs []string
	// KeepDir keeps the logs (copied out of the slot's directory) after Stop.
	KeepDir bool
	// AuditLog has the API server write an audit event, at level Metadata,
	// for every request it completes, to Cluster.AuditLogPath: who made
	// it, the verb, the resource and the answer, as the API server counts
	// them.
	AuditLog bool
	// ControllerManagerQPS is kube-controller-manager's --kube-api-qps,
	// its burst twice that; zero keeps its defaults (20 and 30). Raised
	// for thousands of Deployments, whose ReplicaSets it would otherwise
	// make for many minutes before any other work is done.
	ControllerManagerQPS int
}

// Cluster is a running single-node cluster. Its exported fields are set by
// Start and must not be changed.
type Cluster struct {
	// Dir holds the node's state: certificates, configs, logs, containerd's
	// and the kubelet's directories. Stop removes it.
	Dir string
	// NodeName is the Node's name; NodeIP its InternalIP, where the API
	// server (port 6443) and the cluster DNS (port 53) also listen.
	NodeName string
	NodeIP   net.IP
	DNSIP    net.IP
	// PodCIDR and ServiceCIDR are routed from this machine through the node.
	PodCIDR, ServiceCIDR string
	// KubeconfigPath is an admin (system:masters) kubeconfig.
	KubeconfigPath string
	// CAPath is the cluster CA's certificate.
	CAPath string
	// AuditLogPath is the API server's audit log (Options.AuditLog), one
	// JSON event per line; empty without it.
	AuditLogPath string
	// Config is the admin rest.Config; Client a client of it that knows
	// client-go's and flagplane's kinds.
	Config *rest.Config
	Scheme *k8sruntime.Scheme
	Client client.Client
	// KubectlPath and HelmPath are the binaries Kubectl and Helm run.
	KubectlPath, HelmPath string
	// Timings of Start.
	Timings Timings

	opts       Options
	slot       slot
	pki        *pki
	watchdog   *os.Process
	components map[string]*component
	order      []string
	stopOnce   sync.Once
	stopErr    error
}

// Timings are the measured durations of Start.
type Timings struct {
	APIServer   time.Duration // etcd and kube-apiserver serving
	NodeReady   time.Duration // from the kubelet's start to the Node Ready
	DNSReady    time.Duration // from CoreDNS' start to its readiness
	Total       time.Duration
	ImagesReady time.Duration // the registry loaded
}

// Component names, for Restart, Pause and Resume.
const (
	Etcd                  = "etcd"
	APIServer             = "kube-apiserver"
	ControllerManager     = "kube-controller-manager"
	Scheduler             = "kube-scheduler"
	Containerd            = "containerd"
	Kubelet               = "kubelet"
	KubeProxy             = "kube-proxy"
	CoreDNS               = "coredns"
	Registry              = "registry"
	apiServerPort         = 6443
	startTimeout          = 3 * time.Minute
	defaultStopGrace      = 10 * time.Second
	keepDirEnv            = "FLAGPLANE_KEEP_REALNODE"
	requiredPackagesHint  = "run `make realnode`, which installs Debian's containerd, runc, containernetworking-plugins, iptables, nftables, conntrack and busybox-static"
	requiredBinariesHint  = "run `make realnode`"
	unsupportedMachineMsg = "the real node cannot run on this machine"
)

// Start brings up the cluster: the node's network namespace, the registry,
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// containerd, the kubelet, kube-proxy and CoreDNS, and returns once the
// Node is Ready and DNS answers. On error everything started is removed.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	began := time.Now()
	if err := opts.complete(); err != nil {
		return nil, err
	}
	if err := checkMachine(opts.BinDir); err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, components: map[string]*component{},
		KubectlPath: filepath.Join(opts.BinDir, "kubectl"), HelmPath: filepath.Join(opts.BinDir, "helm")}
	s, err := takeSlot(c.logf)
	if err != nil {
		return nil, err
	}
	c.slot = s
	c.Dir, c.NodeName, c.NodeIP, c.DNSIP = s.Dir(), s.NodeName(), s.NodeIP(), s.NodeIP()
	c.PodCIDR, c.ServiceCIDR = s.PodCIDR(), s.ServiceCIDR()
	if err := c.start(ctx, began); err != nil {
		if stopErr := c.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("removing the partly started node: %w", stopErr))
		}
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, began time.Time) error {
	for _, d := range []string{c.Dir, filepath.Join(c.Dir, "logs"), filepath.Join(c.Dir, "pids")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := c.slot.writeCleanup(c.Dir); err != nil {
		return fmt.Errorf("writing the cleanup script: %w", err)
	}
	wd, err := c.slot.startWatchdog(c.Dir)
	if err != nil {
		return err
	}
	c.watchdog = wd
	if err := c.slot.setupNetwork(); err != nil {
		return err
	}
	if err := c.makeCgroupRoot(); err != nil {
		return err
	}
	if c.pki, err = newPKI(filepath.Join(c.Dir, "pki")); err != nil {
		return fmt.Errorf("making the cluster's CA: %w", err)
	}
	c.CAPath = c.pki.CAPath

	imagesReady := time.Now()
	if err := c.startRegistry(ctx); err != nil {
		return err
	}
	c.Timings.ImagesReady = time.Since(imagesReady)

	apiStarted := time.Now()
	if err := c.startControlPlane(ctx); err != nil {
		return err
	}
	c.Timings.APIServer = time.Since(apiStarted)
	c.logf("API server ready at https://%s:%d after %s", c.NodeIP, apiServerPort, c.Timings.APIServer.Round(time.Millisecond))

	if err := c.startNode(ctx); err != nil {
		return err
	}
	c.Timings.Total = time.Since(began)
	c.logf("node %s Ready after %s, DNS after %s; cluster up in %s (kubeconfig %s)", c.NodeName,
		c.Timings.NodeReady.Round(time.Millisecond), c.Timings.DNSReady.Round(time.Millisecond),
		c.Timings.Total.Round(time.Millisecond), c.KubeconfigPath)
	return nil
}

func (c *Cluster) startRegistry(ctx context.Context) error {
	images := append(defaultImages(c.opts.BinDir), c.opts.Images...)
	path, err := c.writeImages(images)
	if err != nil {
		return err
	}
	reg := c.newComponent(Registry, filepath.Join(c.opts.BinDir, "realnode", "registry"), "-listen", registryAddr, "-images", path)
	if err := reg.start(); err != nil {
		return err
	}
	return c.waitFor(ctx, "the registry to load its images", []*component{reg}, func(context.Context) (bool, error) {
		data, _ := os.ReadFile(reg.logPath)
		return bytes.Contains(data, []byte("listening on")), nil
	})
}

func (c *Cluster) startControlPlane(ctx context.Context) error {
	p := c.pki
	saKey, saPub, err := p.serviceAccountKeys()
	if err != nil {
		return err
	}
	nodeIP := c.NodeIP.String()
	serving, servingKey, err := p.issue(certSpec{name: "apiserver", cn: "kube-apiserver", server: true,
		dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		ips: []net.IP{c.NodeIP, c.slot.KubernetesServiceIP(), net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		return err
	}
	kubeletClient, kubeletClientKey, err := p.issue(certSpec{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true})
	if err != nil {
		return err
	}
	server := fmt.Sprintf("https://%s:%d", nodeIP, apiServerPort)
	c.KubeconfigPath = filepath.Join(c.Dir, "kubeconfig")
	kubeconfigs := map[string]certSpec{
		c.KubeconfigPath:               {name: "admin", cn: "flagplane-realnode-admin", orgs: []string{"system:masters"}},
		c.path("kcm.kubeconfig"):       {name: "kcm", cn: "system:kube-controller-manager"},
		c.path("scheduler.kubeconfig"): {name: "scheduler", cn: "system:kube-scheduler"},
		c.path("kubelet.kubeconfig"):   {name: "kubelet", cn: "system:node:" + c.NodeName, orgs: []string{"system:nodes"}},
		c.path("proxy.kubeconfig"):     {name: "kube-proxy", cn: "system:kube-proxy"},
		c.path("coredns.kubeconfig"):   {name: "coredns", cn: "system:coredns"},
	}
	for path, spec := range kubeconfigs {
		if err := p.kubeconfig(path, server, spec); err != nil {
			return err
		}
	}

	bin := func(name string) string { return filepath.Join(c.opts.BinDir, name) }
	etcd := c.newComponent(Etcd, bin("etcd"), "--name=node", "--data-dir="+c.path("etcd"),
		"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=node=http://127.0.0.1:2380", "--unsafe-no-fsync", "--log-level=warn")
	api := c.newComponent(APIServer, bin("kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=0.0.0.0", fmt.Sprintf("--secure-port=%d", apiServerPort), "--advertise-address="+nodeIP,
		"--tls-cert-file="+serving, "--tls-private-key-file="+servingKey,
		"--client-ca-file="+p.CAPath, "--cert-dir="+c.path("apiserver"),
		"--service-cluster-ip-range="+c.ServiceCIDR,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+saPub, "--service-account-signing-key-file="+saKey,
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--kubelet-client-certificate="+kubeletClient, "--kubelet-client-key="+kubeletClientKey,
		"--kubelet-preferred-address-types=InternalIP",
		"--profiling=false", "--v=1")
	if c.opts.AuditLog {
		policy := c.path("audit-policy.yaml")
		// Metadata for every request, once, when its answer is sent.
		const rules = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived, ResponseStarted, Panic]\nrules:\n- level: Metadata\n"
		if err := os.WriteFile(policy, []byte(rules), 0o600); err != nil {
			return err
		}
		c.AuditLogPath = c.path("audit.log")
		api.argv = append(api.argv, "--audit-policy-file="+policy, "--audit-log-path="+c.AuditLogPath, "--audit-log-format=json")
	}
	for _, comp := range []*component{etcd, api} {
		if err := comp.start(); err != nil {
			return err
		}
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.KubeconfigPath); err != nil {
		return err
	}
	c.Config.QPS, c.Config.Burst = 100, 200
	if c.Scheme, err = newScheme(); err != nil {
		return err
	}
	if c.Client, err = client.New(c.Config, client.Options{Scheme: c.Scheme}); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kube-apiserver to be ready", []*component{etcd, api}, c.apiServerReady); err != nil {
		return err
	}
	if err := c.applyCoreDNSRBAC(ctx); err != nil {
		return err
	}
	for _, dir := range c.opts.CRDDirs {
		if _, err := c.Kubectl("apply", "--server-side", "-f", dir); err != nil {
			return fmt.Errorf("applying the CRDs of %s: %w", dir, err)
		}
	}
	kcmArgs := []string{"--kubeconfig=" + c.path("kcm.kubeconfig"),
		"--authentication-kubeconfig=" + c.path("kcm.kubeconfig"), "--authorization-kubeconfig=" + c.path("kcm.kubeconfig"),
		"--service-account-private-key-file=" + saKey, "--root-ca-file=" + p.CAPath,
		"--use-service-account-credentials=true", "--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port=10257", "--v=1"}
	if q := c.opts.ControllerManagerQPS; q > 0 {
		kcmArgs = append(kcmArgs, fmt.Sprintf("--kube-api-qps=%d", q), fmt.Sprintf("--kube-api-burst=%d", 2*q))
	}
	kcm := c.newComponent(ControllerManager, append([]string{bin("kube-controller-manager")}, kcmArgs...)...)
	sched := c.newComponent(Scheduler, bin("kube-scheduler"),
		"--kubeconfig="+c.path("scheduler.kubeconfig"),
		"--authentication-kubeconfig="+c.path("scheduler.kubeconfig"), "--authorization-kubeconfig="+c.path("scheduler.kubeconfig"),
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=10259", "--v=1")
	for _, comp := range []*component{kcm, sched} {
		if err := comp.start(); err != nil {
			return err
		}
	}
	return c.waitFor(ctx, "the default ServiceAccount", []*component{kcm}, func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, client.IgnoreNotFound(err)
	})
}

func (c *Cluster) apiServerReady(ctx context.Context) (bool, error) {
	rc, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		return false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Config.Host+"/readyz", nil)
	if err != nil {
		return false, err
	}
	resp, err := rc.Do(req)
	if err != nil {
		return false, nil
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}

// applyCoreDNSRBAC grants CoreDNS' user what its kubernetes plugin reads,
// as a cluster's system:coredns ClusterRole does.
func (c *Cluster) applyCoreDNSRBAC(ctx context.Context) error {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "system:coredns"}}}
	for _, obj := range []client.Object{role, binding} {
		if err := c.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CoreDNS' RBAC: %w", err)
		}
	}
	return nil
}

func (c *Cluster) startNode(ctx context.Context) error {
	containerdConfig, err := c.writeContainerdConfig()
	if err != nil {
		return err
	}
	ctrd := c.newComponent(Containerd, "containerd", "--config="+containerdConfig, "--log-level=warn")
	if err := ctrd.start(); err != nil {
		return err
	}
	sock := filepath.Join(c.Dir, "containerd", "containerd.sock")
	if err := c.waitFor(ctx, "containerd's socket", []*component{ctrd}, func(context.Context) (bool, error) {
		return fileExists(sock), nil
	}); err != nil {
		return err
	}
	servingCert, servingKey, err := c.pki.issue(certSpec{name: "kubelet-serving", cn: c.NodeName, server: true,
		dns: []string{c.NodeName}, ips: []net.IP{c.NodeIP}})
	if err != nil {
		return err
	}
	kubeletConfig, err := c.writeKubeletConfig(c.opts.SyncFrequency, servingCert, servingKey)
	if err != nil {
		return err
	}
	kubeletStarted := time.Now()
	kubelet := c.newComponent(Kubelet, filepath.Join(c.opts.BinDir, "kubelet"),
		"--config="+kubeletConfig, "--kubeconfig="+c.path("kubelet.kubeconfig"),
		"--root-dir="+c.path("kubelet"), "--cert-dir="+c.path("kubelet-pki"),
		"--hostname-override="+c.NodeName, "--node-ip="+c.NodeIP.String(), "--v=1")
	if err := kubelet.start(); err != nil {
		return err
	}
	proxyConfig, err := c.writeKubeProxyConfig(c.path("proxy.kubeconfig"))
	if err != nil {
		return err
	}
	proxy := c.newComponent(KubeProxy, filepath.Join(c.opts.BinDir, "kube-proxy"), "--config="+proxyConfig, "--v=1")
	if err := proxy.start(); err != nil {
		return err
	}
	corefile, err := c.writeCorefile(c.path("coredns.kubeconfig"))
	if err != nil {
		return err
	}
	dnsStarted := time.Now()
	dns := c.newComponent(CoreDNS, filepath.Join(c.opts.BinDir, "coredns"), "-conf="+corefile)
	if err := dns.start(); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "Node "+c.NodeName+" to be Ready", []*component{ctrd, kubelet, proxy}, c.nodeReady); err != nil {
		return err
	}
	c.Timings.NodeReady = time.Since(kubeletStarted)
	if err := c.waitFor(ctx, "CoreDNS to be ready", []*component{dns}, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, fmt.Sprintf("http://%s:8181/ready", c.DNSIP)), nil
	}); err != nil {
		return err
	}
	c.Timings.DNSReady = time.Since(dnsStarted)
	return nil
}

func (c *Cluster) nodeReady(ctx context.Context) (bool, error) {
	var node corev1.Node
	if err := c.Client.Get(ctx, client.ObjectKey{Name: c.NodeName}, &node); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue, nil
		}
	}
	return false, nil
}

// nodeCPUShares is the CPU weight of the node's cgroup, which holds its
// Pods: that of 8 busy processes of the host. The host's own processes
// each weigh 1,024 beside it (the kernel's default, which a new cgroup
// also gets), and make test keeps about 8 runnable at a time on 2 cores
// (vmstat's median r; 20 at its 90th percentile). At the default, all of
// the node's Pods together weighed as one such process; in a run at the
// default, the manager's webhook, which judges a flag set of a megabyte
// in 80 ms of CPU time, did not answer within its 5 s three times in a
// row (that the weight was the cause is not shown). A machine that runs a
// node gives its Pods its cores; this is the share that stands for them.
const nodeCPUShares = 8 * 1024

// makeCgroupRoot creates the node's cgroup in every hierarchy: the kubelet
// puts its Pods under it (cgroupRoot) and requires it to exist. In the cpu
// hierarchy it weighs nodeCPUShares.
func (c *Cluster) makeCgroupRoot() error {
	hierarchies, err := filepath.Glob("/sys/fs/cgroup/*/cgroup.procs")
	if err != nil {
		return err
	}
	if len(hierarchies) == 0 {
		return fmt.Errorf("%s: no cgroup v1 hierarchies under /sys/fs/cgroup (this harness runs the kubelet with cgroupfs on cgroup v1)", unsupportedMachineMsg)
	}
	for _, procs := range hierarchies {
		h := filepath.Dir(procs)
		dir := filepath.Join(h, c.slot.CgroupRoot())
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		// A cpuset cgroup takes no tasks until it has cpus and mems.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("writing %s of %s: %w", f, dir, err)
				}
			}
		}
		if shares := filepath.Join(dir, "cpu.shares"); fileExists(shares) {
			if err := os.WriteFile(shares, []byte(strconv.Itoa(nodeCPUShares)), 0o644); err != nil {
				return fmt.Errorf("writing cpu.shares of %s: %w", dir, err)
			}
		}
	}
	return nil
}

// Stop stops every process, removes what the node made (see the cleanup
// script) and releases the slot. It is safe to call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		began := time.Now()
		var errs []error
		// The kubelet first, so that it restarts nothing; then the
		// containers, through containerd while it runs; then the rest, the
		// node before the control plane.
		if kubelet, ok := c.components[Kubelet]; ok {
			if err := kubelet.stop(defaultStopGrace); err != nil {
				errs = append(errs, err)
			}
		}
		c.stopContainers()
		for i := len(c.order) - 1; i >= 0; i-- {
			if err := c.components[c.order[i]].stop(defaultStopGrace); err != nil {
				errs = append(errs, err)
			}
		}
		for _, comp := range c.components {
			comp.closeLog()
		}
		if c.opts.KeepDir || os.Getenv(keepDirEnv) != "" {
			kept := c.Dir + "-logs-" + time.Now().Format("150405")
			if err := exec.Command("cp", "-r", filepath.Join(c.Dir, "logs"), kept).Run(); err == nil {
				c.logf("kept the logs in %s", kept)
			}
		}
		if fileExists(filepath.Join(c.Dir, cleanupScript)) {
			if out, err := exec.Command("sh", filepath.Join(c.Dir, cleanupScript)).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("cleanup: %w: %s", err, out))
			}
		}
		if left := c.slot.leftovers(); left != "" {
			errs = append(errs, fmt.Errorf("after cleanup, %s is still there", left))
		}
		if c.watchdog != nil {
			_ = c.watchdog.Kill()
		}
		c.slot.release()
		c.logf("node stopped and removed in %s", time.Since(began).Round(time.Millisecond))
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// stopContainers stops the containers gracefully through their shims, so
// that the shims exit and remove their sockets; the cleanup script kills
// whatever remains.
func (c *Cluster) stopContainers() {
	ctrd, ok := c.components[Containerd]
	if !ok || !ctrd.running() {
		return
	}
	ctr := func(args ...string) string {
		argv := c.slot.inNetns(append([]string{"ctr", "--address", filepath.Join(c.Dir, "containerd", "containerd.sock"), "-n", "k8s.io"}, args...)...)
		out, _ := exec.Command(argv[0], argv[1:]...).Output()
		return string(out)
	}
	tasks := strings.Fields(ctr("tasks", "ls", "-q"))
	for _, id := range tasks {
		ctr("tasks", "kill", "-s", "SIGKILL", id)
	}
	for _, id := range tasks {
		ctr("tasks", "delete", "-f", id)
	}
}

// Kubectl runs kubectl against the cluster and returns its standard output;
// an error carries its standard error.
func (c *Cluster) Kubectl(args ...string) (string, error) {
	return c.command(c.KubectlPath, nil, args...)
}

// KubectlWithInput is Kubectl with stdin, e.g. for `apply -f -`.
func (c *Cluster) KubectlWithInput(stdin io.Reader, args ...string) (string, error) {
	return c.command(c.KubectlPath, stdin, args...)
}

// Helm runs helm against the cluster.
func (c *Cluster) Helm(args ...string) (string, error) {
	return c.command(c.HelmPath, nil, args...)
}

func (c *Cluster) command(bin string, stdin io.Reader, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	home := c.path("home")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath, "KUBERC=off", "HOME="+home,
		"HELM_CACHE_HOME="+filepath.Join(home, "helm-cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "helm-config"),
		"HELM_DATA_HOME="+filepath.Join(home, "helm-data"))
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Restart stops a component (SIGTERM, SIGKILL after grace) and starts it again.
func (c *Cluster) Restart(name string, grace time.Duration) error {
	comp, ok := c.components[name]
	if !ok {
		return fmt.Errorf("no component %q", name)
	}
	if err := comp.stop(grace); err != nil {
		return err
	}
	return comp.start()
}

// Pause stops a component with SIGSTOP, until Resume.
func (c *Cluster) Pause(name string) error { return c.signal(name, syscall.SIGSTOP) }

// Resume continues a component that Pause stopped (SIGCONT).
func (c *Cluster) Resume(name string) error { return c.signal(name, syscall.SIGCONT) }

func (c *Cluster) signal(name string, sig syscall.Signal) error {
	comp, ok := c.components[name]
	if !ok {
		return fmt.Errorf("no component %q", name)
	}
	return comp.signal(sig)
}

// HostIP is the host's address on its link to the node: pods reach the
// host, and servers a test runs there, at it.
func (c *Cluster) HostIP() net.IP { return c.slot.HostIP() }

// LogPath is the log file of a component.
func (c *Cluster) LogPath(name string) string { return filepath.Join(c.Dir, "logs", name+".log") }

// Healthy reports a component that exited although it should run.
func (c *Cluster) Healthy() error {
	var errs []error
	for _, name := range c.order {
		if err := c.components[name].exitedEarly(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// waitFor polls cond until it holds, failing early with the log of a
// watched component that exits.
func (c *Cluster) waitFor(ctx context.Context, what string, watch []*component, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, comp := range watch {
			if err := comp.exitedEarly(); err != nil {
				return false, err
			}
		}
		ok, err := cond(ctx)
		if err != nil {
			lastErr = err
		}
		return ok, nil
	})
	if err != nil {
		if lastErr != nil {
			err = fmt.Errorf("%w (last error: %w)", err, lastErr)
		}
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

func (c *Cluster) path(name string) string { return filepath.Join(c.Dir, name) }

func (c *Cluster) logf(format string, args ...any) {
	fmt.Fprintf(c.opts.Log, "realnode: "+format+"\n", args...)
}

func newScheme() (*k8sruntime.Scheme, error) {
	return api.NewScheme()
}

func httpOK(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
