package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/flagplane/flagplane/api"
	"github.com/flagplane/flagplane/test/internal/child"
	"github.com/flagplane/flagplane/test/internal/scratch"
)

// DefaultControllers are the kube-controller-manager controllers run when
// Options.Controllers is empty: the ones whose effects flagplane depends on
// (workloads get Pods, owned objects are garbage-collected, deleted
// namespaces are finalized, and every namespace gets the default
// ServiceAccount that Pod admission requires), and the two a node needs to
// run pods (test/node): every namespace gets the kube-root-ca.crt
// ConfigMap that the service-account token volume projects, and a Node that
// reports Ready loses the not-ready taint that keeps the scheduler away.
// Without Nodes, the last two do nothing.
var DefaultControllers = []string{
	"deployment", "replicaset", "statefulset", "daemonset", "job", "cronjob",
	"garbagecollector", "namespace", "serviceaccount",
	"root-ca-cert-publisher", "nodelifecycle",
}

// KeepDirEnv, when set to a non-empty value, keeps ControlPlane.Dir (logs,
// kubeconfig, etcd data) on disk after Stop, for reading after a failed run.
const KeepDirEnv = "FLAGPLANE_KEEP_CONTROLPLANE"

// Options configures Start. The zero value is what most suites want.
type Options struct {
	// RootDir is the repository root, which holds config/crd/bases and bin/.
	// When empty it is found by walking up from the working directory to the
	// go.mod of the flagplane module.
	RootDir string

	// BinDir holds etcd, kube-apiserver, kube-controller-manager and kubectl.
	// When empty: $KUBEBUILDER_ASSETS if set, else <RootDir>/bin.
	BinDir string

	// CRDDirectoryPaths are directories of further CRDs to install, besides
	// flagplane's own in <RootDir>/config/crd/bases.
	CRDDirectoryPaths []string

	// GatewayAPI installs Gateway API's standard CRDs (ReferenceGrant,
	// HTTPRoute, ...) from the files of its Go module, which `make
	// controlplane` puts into <BinDir>/gateway-api-crds.
	GatewayAPI bool

	// WebhookInstallOptions are handed to envtest, for suites that serve
	// admission webhooks from the test process.
	WebhookInstallOptions envtest.WebhookInstallOptions

	// Controllers run by kube-controller-manager; DefaultControllers when empty.
	Controllers []string

	// Scheduler also starts kube-scheduler, for the suites that run pods on
	// a node (test/node). Without it, Pods stay unbound unless they name
	// their node.
	Scheduler bool

	// NoControllerManager runs etcd and kube-apiserver only, for benchmarks
	// that need none of its controllers and should not pay for them (a
	// Deployment then gets no ReplicaSet or Pod). Without its serviceaccount
	// controller NewNamespace cannot be used: create namespaces directly.
	NoControllerManager bool

	// Log receives progress and timings (os.Stderr when nil). Ginkgo suites
	// pass GinkgoWriter so that the output shows with -ginkgo.v or on failure.
	Log io.Writer

	// KeepDir keeps Dir after Stop (see also KeepDirEnv).
	KeepDir bool

	// GOGC is the garbage collector's target of the control plane's
	// processes: ProcessGOGC when empty.
	GOGC string
}

// Timings are the measured durations of Start.
type Timings struct {
	// APIServer is etcd and kube-apiserver up and the CRDs installed.
	APIServer time.Duration
	// ControllerManager is from starting kube-controller-manager until it has
	// been seen doing its job.
	ControllerManager time.Duration
	// Scheduler is from starting kube-scheduler until it has been seen
	// binding a Pod (zero without Options.Scheduler).
	Scheduler time.Duration
	// Total is the whole of Start.
	Total time.Duration
}

// ControlPlane is a running etcd, kube-apiserver and kube-controller-manager
// (and kube-scheduler, with Options.Scheduler).
// Its exported fields are set by Start and must not be changed.
type ControlPlane struct {
	// Dir holds everything the control plane writes: etcd data, certificates,
	// kubeconfigs and logs. Stop removes it unless told to keep it.
	Dir string
	// KubeconfigPath is an admin (system:masters) kubeconfig for kubectl.
	KubeconfigPath string
	// ControllerManagerLogPath is kube-controller-manager's output.
	ControllerManagerLogPath string
	// SchedulerLogPath is kube-scheduler's output, with Options.Scheduler.
	SchedulerLogPath string
	// CAPath is the API server's CA certificate (PEM), which
	// kube-controller-manager publishes as the kube-root-ca.crt ConfigMap.
	CAPath string
	// APIServerLogPath and EtcdLogPath are the output of those processes.
	APIServerLogPath string
	EtcdLogPath      string
	// KubectlPath is the kubectl binary that Kubectl runs.
	KubectlPath string

	// Config is an admin rest.Config for the API server.
	Config *rest.Config
	// Scheme knows client-go's kinds and flagplane's API.
	Scheme *k8sruntime.Scheme
	// Client is a controller-runtime client (no cache) using Scheme.
	Client client.Client
	// Env is the underlying envtest environment, for webhook serving options.
	Env *envtest.Environment

	// Timings of Start.
	Timings Timings

	log      io.Writer
	keepDir  bool
	logFiles []*os.File

	kcm *child.Process

	scheduler *child.Process

	watchdog *watchdog
	// scratch is Dir, locked for as long as this process lives.
	scratch *scratch.Dir

	stopOnce sync.Once
	stopErr  error
}

// Start starts etcd and kube-apiserver through envtest, installs the CRDs,
// starts kube-controller-manager (and kube-scheduler, with
// Options.Scheduler) and waits until they work. ctx bounds the
// start-up only: the processes run until Stop. On error everything started
// so far is stopped again.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	began := time.Now()
	if err := opts.complete(); err != nil {
		return nil, err
	}
	binaries := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl"}
	if opts.Scheduler {
		binaries = append(binaries, "kube-scheduler")
	}
	for _, name := range binaries {
		if _, err := os.Stat(filepath.Join(opts.BinDir, name)); err != nil {
			return nil, fmt.Errorf("control-plane binary %s missing (run `make controlplane`): %w", name, err)
		}
	}

	if opts.GatewayAPI {
		crds := GatewayAPICRDDir(opts.BinDir)
		if matches, _ := filepath.Glob(filepath.Join(crds, "*referencegrants.yaml")); len(matches) == 0 {
			return nil, fmt.Errorf("no Gateway API CRDs in %s (run `make controlplane`)", crds)
		}
		opts.CRDDirectoryPaths = append(opts.CRDDirectoryPaths, crds)
	}

	// A directory a dead run left (its etcd's data, its logs) goes first.
	scratchDir, err := scratch.Make("flagplane-controlplane-")
	if err != nil {
		return nil, fmt.Errorf("creating the control plane's directory: %w", err)
	}
	dir := scratchDir.Path
	cp := &ControlPlane{
		scratch:                  scratchDir,
		Dir:                      dir,
		KubeconfigPath:           filepath.Join(dir, "kubeconfig"),
		ControllerManagerLogPath: filepath.Join(dir, "kube-controller-manager.log"),
		SchedulerLogPath:         filepath.Join(dir, "kube-scheduler.log"),
		CAPath:                   filepath.Join(dir, "ca.crt"),
		APIServerLogPath:         filepath.Join(dir, "kube-apiserver.log"),
		EtcdLogPath:              filepath.Join(dir, "etcd.log"),
		KubectlPath:              filepath.Join(opts.BinDir, "kubectl"),
		log:                      opts.Log,
		keepDir:                  opts.KeepDir || os.Getenv(KeepDirEnv) != "",
	}
	if err := cp.start(ctx, opts, began); err != nil {
		if stopErr := cp.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the partly started control plane: %w", stopErr))
		}
		return nil, err
	}
	return cp, nil
}

func (cp *ControlPlane) start(ctx context.Context, opts Options, began time.Time) error {
	scheme, err := api.NewScheme()
	if err != nil {
		return err
	}
	cp.Scheme = scheme

	etcdOut, err := cp.createLog(cp.EtcdLogPath)
	if err != nil {
		return err
	}
	apiOut, err := cp.createLog(cp.APIServerLogPath)
	if err != nil {
		return err
	}
	etcdDir, certDir := filepath.Join(cp.Dir, "etcd"), filepath.Join(cp.Dir, "apiserver")
	for _, d := range []string{etcdDir, certDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}

	cp.Env = &envtest.Environment{
		Scheme:                   cp.Scheme,
		CRDDirectoryPaths:        append([]string{filepath.Join(opts.RootDir, "config", "crd", "bases")}, opts.CRDDirectoryPaths...),
		ErrorIfCRDPathMissing:    true,
		WebhookInstallOptions:    opts.WebhookInstallOptions,
		ControlPlaneStartTimeout: time.Minute,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	// Paths are set explicitly rather than through BinaryAssetsDirectory so
	// that Options.BinDir wins over $KUBEBUILDER_ASSETS and $TEST_ASSET_*;
	// each is a script that runs Options.BinDir's binary with
	// Options.GOGC. The data and certificate dirs live under Dir so that the
	// watchdog can recognise these processes by their command lines.
	scripts := filepath.Join(cp.Dir, "bin")
	etcdPath, err := withGOGC(scripts, filepath.Join(opts.BinDir, "etcd"), opts.GOGC)
	if err != nil {
		return err
	}
	apiServerPath, err := withGOGC(scripts, filepath.Join(opts.BinDir, "kube-apiserver"), opts.GOGC)
	if err != nil {
		return err
	}
	cp.Env.ControlPlane.Etcd = &envtest.Etcd{
		Path: etcdPath, DataDir: etcdDir, Out: etcdOut, Err: etcdOut,
	}
	// A test's etcd need not survive the machine's crash: without an fsync
	// per write, its writes cost the API server's latency and the kernel's
	// writeback nothing (etcd's flag for tests).
	cp.Env.ControlPlane.Etcd.Configure().Set("unsafe-no-fsync", "true")
	apiServer := &envtest.APIServer{
		Path: apiServerPath, CertDir: certDir, Out: apiOut, Err: apiOut,
	}
	// envtest disables the ServiceAccount admission plugin because it has no
	// controller creating the default ServiceAccount. We run that controller,
	// so Pods are admitted as on a real cluster, with a service account.
	apiServer.Configure().Set("disable-admission-plugins", "")
	cp.Env.ControlPlane.APIServer = apiServer
	cp.Env.ControlPlane.KubectlPath = cp.KubectlPath

	cfg, err := cp.Env.Start()
	if err != nil {
		return fmt.Errorf("starting etcd and kube-apiserver with envtest (logs in %s): %w", cp.Dir, err)
	}
	cp.Config = cfg
	if err := cp.adoptServingCerts(); err != nil {
		return err
	}
	cp.Timings.APIServer = time.Since(began)
	cp.logf("etcd and kube-apiserver up, CRDs installed in %s", cp.Timings.APIServer.Round(time.Millisecond))

	if err := os.WriteFile(cp.KubeconfigPath, cp.Env.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("writing the admin kubeconfig: %w", err)
	}
	if err := os.WriteFile(cp.CAPath, cfg.CAData, 0o644); err != nil {
		return fmt.Errorf("writing the API server's CA: %w", err)
	}
	if cp.Client, err = client.New(cfg, client.Options{Scheme: cp.Scheme}); err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}

	if opts.NoControllerManager {
		cp.armWatchdog(2)
		cp.Timings.Total = time.Since(began)
		cp.logf("control plane ready in %s, without kube-controller-manager (kubeconfig %s)",
			cp.Timings.Total.Round(time.Millisecond), cp.KubeconfigPath)
		return nil
	}
	kcmStarted := time.Now()
	if err := cp.startControllerManager(opts.BinDir, opts.Controllers, opts.GOGC); err != nil {
		return err
	}
	cp.armWatchdog(3)
	if err := cp.waitForControllerManager(ctx); err != nil {
		return err
	}
	cp.Timings.ControllerManager = time.Since(kcmStarted)
	cp.logf("kube-controller-manager working after %s", cp.Timings.ControllerManager.Round(time.Millisecond))
	if opts.Scheduler {
		schedulerStarted := time.Now()
		if err := cp.startScheduler(opts.BinDir, opts.GOGC); err != nil {
			return err
		}
		if err := cp.waitForScheduler(ctx); err != nil {
			return err
		}
		cp.Timings.Scheduler = time.Since(schedulerStarted)
		cp.logf("kube-scheduler binding pods after %s", cp.Timings.Scheduler.Round(time.Millisecond))
	}
	cp.Timings.Total = time.Since(began)
	cp.logf("control plane ready in %s (kubeconfig %s)", cp.Timings.Total.Round(time.Millisecond), cp.KubeconfigPath)
	return nil
}

// startControllerManager runs kube-controller-manager as a user of its own,
// like on a real cluster, so that webhooks see it as the requester of the
// Pods it creates.
func (cp *ControlPlane) startControllerManager(binDir string, controllers []string, gogc string) error {
	user, err := cp.Env.AddUser(envtest.User{Name: "kcm", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("provisioning the kube-controller-manager user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("rendering the kube-controller-manager kubeconfig: %w", err)
	}
	kubeconfigPath := filepath.Join(cp.Dir, "kube-controller-manager.kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("writing the kube-controller-manager kubeconfig: %w", err)
	}
	out, err := cp.createLog(cp.ControllerManagerLogPath)
	if err != nil {
		return err
	}
	if len(controllers) == 0 {
		controllers = DefaultControllers
	}

	cmd := exec.Command(filepath.Join(binDir, "kube-controller-manager"),
		"--kubeconfig="+kubeconfigPath,
		"--controllers="+strings.Join(controllers, ","),
		// One credential for all controllers: there are no token signing
		// keys to mint per-controller service-account tokens with.
		"--use-service-account-credentials=false",
		// Published as kube-root-ca.crt in every namespace, for pods to
		// trust the API server (root-ca-cert-publisher).
		"--root-ca-file="+cp.CAPath,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0", // nothing to serve: readiness is checked by its effects
	)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = processEnv(gogc)
	if cp.kcm, err = child.Start(cmd); err != nil {
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	return nil
}

// WatchdogPID is the process id of the watchdog that kills this control
// plane's processes should the test process die without calling Stop, or
// 0 when there is none (Start logs why).
func (cp *ControlPlane) WatchdogPID() int {
	if cp.watchdog == nil {
		return 0
	}
	return cp.watchdog.cmd.Process.Pid
}

// armWatchdog makes sure that etcd and kube-apiserver, which envtest starts
// without a parent-death signal, do not outlive a test process that dies
// without calling Stop. It is a safety net: failing to arm it is reported
// but does not fail Start.
func (cp *ControlPlane) armWatchdog(processes int) {
	pids, err := childrenMentioning(cp.Dir)
	if err == nil && len(pids) < processes {
		err = fmt.Errorf("found only %v of the %d control-plane processes", pids, processes)
	}
	if err == nil {
		cp.watchdog, err = startWatchdog(pids)
	}
	if err != nil {
		cp.logf("warning: no watchdog for the control plane, a crashed test may leave processes behind: %v", err)
	}
}

// waitForControllerManager returns once kube-controller-manager has been seen
// doing what the suites rely on: the default ServiceAccount exists (so Pods
// are admitted), a Deployment got a ReplicaSet and a Pod, and foreground
// deletion of that Deployment completed (so the garbage collector has synced
// its graph). A process that is merely running proves none of this.
func (cp *ControlPlane) waitForControllerManager(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	if err := cp.waitFor(ctx, "the default ServiceAccount", func(ctx context.Context) (bool, error) {
		return exists(ctx, cp.Client, client.ObjectKey{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{})
	}); err != nil {
		return err
	}

	probe := probeDeployment()
	if err := cp.Client.Create(ctx, probe); err != nil {
		return fmt.Errorf("creating the probe Deployment: %w", err)
	}
	if err := cp.waitFor(ctx, "a Pod of the probe Deployment", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := cp.Client.List(ctx, &pods, client.InNamespace(probe.Namespace), client.MatchingLabels(probe.Spec.Selector.MatchLabels)); err != nil {
			return false, err
		}
		return len(pods.Items) > 0, nil
	}); err != nil {
		return err
	}
	if err := cp.Client.Delete(ctx, probe, client.PropagationPolicy("Foreground")); err != nil {
		return fmt.Errorf("deleting the probe Deployment: %w", err)
	}
	return cp.waitFor(ctx, "the garbage collector to delete the probe Deployment and its Pods", func(ctx context.Context) (bool, error) {
		if found, err := exists(ctx, cp.Client, client.ObjectKeyFromObject(probe), probe.DeepCopy()); found || err != nil {
			return false, err
		}
		var pods corev1.PodList
		err := cp.Client.List(ctx, &pods, client.InNamespace(probe.Namespace), client.MatchingLabels(probe.Spec.Selector.MatchLabels))
		return err == nil && len(pods.Items) == 0, err
	})
}

// waitFor polls cond until it holds, failing early with the tail of its log
// if kube-controller-manager exits.
func (cp *ControlPlane) waitFor(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if !cp.kcm.Running() {
			return false, fmt.Errorf("kube-controller-manager exited (%v); last lines of %s:\n%s",
				cp.kcm.Err(), cp.ControllerManagerLogPath, tail(cp.ControllerManagerLogPath, 20))
		}
		ok, err := cond(ctx)
		if err != nil {
			lastErr = err // API errors may be transient while things settle
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

// NewNamespace creates a namespace named after prefix and returns its name
// once its default ServiceAccount exists, so that Pods created in it are
// admitted at the first attempt.
func (cp *ControlPlane) NewNamespace(ctx context.Context, prefix string) (string, error) {
	ns := &corev1.Namespace{}
	ns.GenerateName = prefix + "-"
	if err := cp.Client.Create(ctx, ns); err != nil {
		return "", fmt.Errorf("creating a namespace %s-*: %w", prefix, err)
	}
	err := cp.waitFor(ctx, "the default ServiceAccount of namespace "+ns.Name, func(ctx context.Context) (bool, error) {
		return exists(ctx, cp.Client, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{})
	})
	return ns.Name, err
}

// Kubectl runs kubectl against the control plane and returns its standard
// output. On failure the error carries kubectl's standard error, which holds
// the API server's message.
func (cp *ControlPlane) Kubectl(args ...string) (string, error) {
	return cp.KubectlWithInput(nil, args...)
}

// KubectlWithInput is Kubectl with stdin, e.g. for `apply -f -`.
func (cp *ControlPlane) KubectlWithInput(stdin io.Reader, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The cache dir and the disabled kuberc keep the host's ~/.kube out of
	// the tests, in both directions.
	full := append([]string{"--kubeconfig=" + cp.KubeconfigPath, "--cache-dir=" + filepath.Join(cp.Dir, "kubectl-cache")}, args...)
	cmd := exec.CommandContext(ctx, cp.KubectlPath, full...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.KubeconfigPath, "KUBERC=off")
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Stop stops kube-scheduler, kube-controller-manager, kube-apiserver and etcd, and removes
// Dir. It is safe to call more than once and from a cleanup that runs after
// a failed spec; later calls return the first call's result.
func (cp *ControlPlane) Stop() error {
	cp.stopOnce.Do(func() {
		began := time.Now()
		var errs []error
		if cp.scheduler != nil {
			if killed, err := cp.scheduler.Stop(20 * time.Second); err != nil || killed {
				errs = append(errs, fmt.Errorf("stopping kube-scheduler (killed: %t): %w", killed, err))
			}
		}
		if cp.kcm != nil {
			if err := cp.stopControllerManager(); err != nil {
				errs = append(errs, err)
			}
		}
		if cp.Env != nil {
			if err := cp.Env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping kube-apiserver and etcd: %w", err))
			}
		}
		// Disarmed only now: had a stop above hung, the watchdog still covers
		// the case that the test process is killed meanwhile.
		cp.watchdog.disarm()
		for _, f := range cp.logFiles {
			_ = f.Close()
		}
		if cp.keepDir {
			if err := cp.scratch.Keep(); err != nil {
				errs = append(errs, fmt.Errorf("keeping %s: %w", cp.Dir, err))
			}
			cp.logf("control plane stopped in %s; kept %s", time.Since(began).Round(time.Millisecond), cp.Dir)
		} else {
			if err := cp.scratch.Remove(); err != nil {
				errs = append(errs, fmt.Errorf("removing %s: %w", cp.Dir, err))
			}
			cp.logf("control plane stopped in %s", time.Since(began).Round(time.Millisecond))
		}
		cp.stopErr = errors.Join(errs...)
	})
	return cp.stopErr
}

// adoptServingCerts moves the directory of webhook serving certificates
// that envtest makes at every start, webhooks or not, from the temporary
// directory into Dir. envtest removes it only in Stop: in Dir, it goes
// with Dir also when this process dies before (scratch reaps Dir).
func (cp *ControlPlane) adoptServingCerts() error {
	w := &cp.Env.WebhookInstallOptions
	if w.LocalServingCertDir == "" {
		return nil
	}
	moved := filepath.Join(cp.Dir, "webhook-serving-certs")
	if err := os.Rename(w.LocalServingCertDir, moved); err != nil {
		return fmt.Errorf("moving envtest's webhook serving certificates into %s: %w", cp.Dir, err)
	}
	w.LocalServingCertDir = moved
	return nil
}

func (cp *ControlPlane) stopControllerManager() error {
	killed, err := cp.kcm.Stop(20 * time.Second)
	if err != nil {
		return fmt.Errorf("stopping kube-controller-manager: %w", err)
	}
	if killed {
		return errors.New("kube-controller-manager did not exit within 20s of SIGTERM; killed it")
	}
	return nil
}

func (cp *ControlPlane) createLog(path string) (*os.File, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating log file: %w", err)
	}
	cp.logFiles = append(cp.logFiles, f)
	return f, nil
}

func (cp *ControlPlane) logf(format string, args ...any) {
	fmt.Fprintf(cp.log, "controlplane: "+format+"\n", args...)
}

func (o *Options) complete() error {
	if o.RootDir == "" {
		root, err := findRepoRoot()
		if err != nil {
			return err
		}
		o.RootDir = root
	}
	if o.BinDir == "" {
		o.BinDir = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if o.BinDir == "" {
		o.BinDir = filepath.Join(o.RootDir, "bin")
	}
	if o.Log == nil {
		o.Log = os.Stderr
	}
	if o.GOGC == "" {
		o.GOGC = ProcessGOGC
	}
	return nil
}

// modulePath identifies the repository root among the go.mod files above the
// working directory (the tool wrapper modules under hack/ have their own).
const modulePath = "github.com/flagplane/flagplane"

// RepoRoot is the repository root: the directory of the flagplane module's
// go.mod at or above the working directory.
func RepoRoot() (string, error) { return findRepoRoot() }

func findRepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declaresModule(data, modulePath) {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod of module %s in %s or above", modulePath, wd)
		}
	}
}

func declaresModule(gomod []byte, path string) bool {
	s := bufio.NewScanner(bytes.NewReader(gomod))
	for s.Scan() {
		if f := strings.Fields(s.Text()); len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == path {
			return true
		}
	}
	return false
}

func exists(ctx context.Context, c client.Client, key client.ObjectKey, obj client.Object) (bool, error) {
	err := c.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string { return Tail(path, n) }

// Tail returns the last n lines of a file, for the error messages of
// harnesses that run processes with log files.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// GatewayAPICRDDir is where `make controlplane` puts Gateway API's CRD files.
func GatewayAPICRDDir(binDir string) string { return filepath.Join(binDir, "gateway-api-crds") }

// ServiceAccountSigningKeyPath is the private key with which the API server
// signs service-account tokens (envtest generates it), for suites that need
// a token the API server would have issued but cannot be asked for, such as
// an expired one.
func (cp *ControlPlane) ServiceAccountSigningKeyPath() string {
	return filepath.Join(cp.Dir, "apiserver", "sa-signer.key")
}

// ServiceAccountIssuer is the issuer of the API server's service-account tokens.
func (cp *ControlPlane) ServiceAccountIssuer() string {
	return strings.TrimSuffix(cp.Config.Host, "/") + "/"
}
