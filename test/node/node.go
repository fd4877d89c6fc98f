package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/node/internal/mountns"
)

// Defaults of Options.
const (
	DefaultName       = "flagplane-node"
	DefaultFlagdImage = "open-feature/flagd"
)

// KeepDirEnv, when set to a non-empty value, keeps Node.Dir (pod
// directories and container logs) after Stop.
const KeepDirEnv = "FLAGPLANE_KEEP_NODE"

// Options configures Start. The zero value runs flagd images with the
// flagd binary beside the control plane's binaries.
type Options struct {
	// Name of the Node; DefaultName when empty.
	Name string
	// FlagdImage is the image name (without tag) whose containers run as
	// FlagdBinary, with their port flags remapped. It matches any tag or
	// digest, and any registry or path prefix ("ghcr.io/open-feature/flagd").
	// DefaultFlagdImage when empty.
	FlagdImage string
	// FlagdBinary is the flagd executable; "flagd" in the control plane's
	// binary directory when empty.
	FlagdBinary string
	// Binaries maps further image names (matched as FlagdImage is) to local
	// executables that stand in for them, e.g. the OpenFeature SDK client of
	// test/realclients. Containers of any other image run as idle
	// placeholders.
	Binaries map[string]string
	// Capacity is the Node's capacity and allocatable; cpu 8, memory 16Gi,
	// pods 110 where unset.
	Capacity corev1.ResourceList
	// Labels are added to the Node's.
	Labels map[string]string
	// RestartBackoff is the first delay before restarting a failed
	// container, doubled on each further restart up to MaxRestartBackoff:
	// the kubelet's 10s and 5m when zero. Suites may shorten them.
	RestartBackoff    time.Duration
	MaxRestartBackoff time.Duration
	// LeaseDuration of the node's Lease (renewed every quarter of it); 40s
	// when zero. StatusInterval is how often the Node's status heartbeat is
	// written; a minute when zero.
	LeaseDuration  time.Duration
	StatusInterval time.Duration
	// StopGrace bounds the grace period of the pods' processes when the
	// node stops; 2s when zero.
	StopGrace time.Duration
	// Log receives the agent's messages (os.Stderr when nil).
	Log io.Writer
	// KeepDir keeps Dir after Stop (see also KeepDirEnv).
	KeepDir bool
}

func (o *Options) complete(cp *controlplane.ControlPlane) error {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.FlagdImage == "" {
		o.FlagdImage = DefaultFlagdImage
	}
	if o.FlagdBinary == "" {
		o.FlagdBinary = filepath.Join(filepath.Dir(cp.KubectlPath), "flagd")
	}
	binaries := map[string]string{"flagd (" + o.FlagdImage + ")": o.FlagdBinary}
	for image, b := range o.Binaries {
		binaries[image] = b
	}
	for image, b := range binaries {
		info, err := os.Stat(b)
		if err != nil {
			return fmt.Errorf("binary for image %s: %w (flagd is built by `make realclients`)", image, err)
		}
		if info.IsDir() || info.Mode()&0o111 == 0 {
			return fmt.Errorf("binary for image %s: %s is not executable", image, b)
		}
	}
	defaults := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	capacity := corev1.ResourceList{}
	for k, v := range defaults {
		capacity[k] = v
	}
	for k, v := range o.Capacity {
		capacity[k] = v
	}
	o.Capacity = capacity
	if o.RestartBackoff == 0 {
		o.RestartBackoff = 10 * time.Second
	}
	if o.MaxRestartBackoff == 0 {
		o.MaxRestartBackoff = 5 * time.Minute
	}
	o.MaxRestartBackoff = max(o.MaxRestartBackoff, o.RestartBackoff)
	if o.LeaseDuration == 0 {
		o.LeaseDuration = 40 * time.Second
	}
	if o.StatusInterval == 0 {
		o.StatusInterval = time.Minute
	}
	if o.StopGrace == 0 {
		o.StopGrace = 2 * time.Second
	}
	if o.Log == nil {
		o.Log = os.Stderr
	}
	o.KeepDir = o.KeepDir || os.Getenv(KeepDirEnv) != ""
	return nil
}

// Node is a running agent. See the package documentation.
type Node struct {
	opts   Options
	dir    string
	cp     *controlplane.ControlPlane
	client kubernetes.Interface // as the node's own user
	admin  kubernetes.Interface // for setting up and removing the node only

	facts      nodeFacts
	serviceEnv []envVar
	envSource  envSource
	ports      *portAllocator
	objects    *objectWatches
	recorder   record.EventRecorder
	broadcast  record.EventBroadcaster

	ctx    context.Context
	cancel context.CancelFunc
	bg     sync.WaitGroup // heartbeat and informer

	mu       sync.Mutex
	runners  map[types.UID]*podRunner
	stopping bool // no new runners

	imageMu  sync.Mutex
	imageIDs map[string]string

	stopOnce sync.Once
	stopErr  error
}

// Start registers a Node with the control plane and runs the pods bound to
// it until Stop. ctx bounds the start-up only. It fails with a clear error
// when this machine cannot run processes in mount namespaces.
func Start(ctx context.Context, cp *controlplane.ControlPlane, opts Options) (*Node, error) {
	began := time.Now()
	if err := opts.complete(cp); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "flagplane-node-")
	if err != nil {
		return nil, fmt.Errorf("creating the node's directory: %w", err)
	}
	// The pods' directories are bind-mounted into processes that may run
	// as any user: the path to them must be traversable.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	n := &Node{opts: opts, dir: dir, cp: cp, runners: map[types.UID]*podRunner{}, imageIDs: map[string]string{}}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if err := n.start(ctx); err != nil {
		if stopErr := n.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the partly started node: %w", stopErr))
		}
		return nil, err
	}
	n.logf("node %s ready and schedulable in %s (directory %s)", opts.Name, time.Since(began).Round(time.Millisecond), dir)
	return n, nil
}

func (n *Node) start(ctx context.Context) error {
	if err := os.MkdirAll(n.scratchDir(), 0o700); err != nil {
		return err
	}
	if err := mountns.Check(n.scratchDir()); err != nil {
		return fmt.Errorf("the flagplane test node runs each container in a mount namespace of its own, "+
			"which needs Linux, root and CAP_SYS_ADMIN (check `unshare -m true`): %w", err)
	}
	apiServer, err := url.Parse(n.cp.Config.Host)
	if err != nil {
		return fmt.Errorf("parsing the API server's address %q: %w", n.cp.Config.Host, err)
	}
	n.serviceEnv = serviceEnv(apiServer)
	n.facts = nodeFacts{ip: "127.0.0.1", allocatable: n.opts.Capacity}
	n.ports = newPortAllocator()

	if n.admin, err = kubernetes.NewForConfig(n.cp.Config); err != nil {
		return fmt.Errorf("creating an admin client: %w", err)
	}
	if n.client, err = n.credentials(ctx); err != nil {
		return err
	}
	n.envSource = apiEnvSource{client: n.client}
	n.objects = newObjectWatches(n.client)
	n.broadcast = record.NewBroadcaster(record.WithContext(n.ctx))
	n.broadcast.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: n.client.CoreV1().Events("")})
	n.recorder = n.broadcast.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "flagplane-node", Host: n.opts.Name})

	if err := n.register(ctx); err != nil {
		return err
	}
	n.bg.Add(1)
	go func() { defer n.bg.Done(); n.heartbeat() }()
	if err := n.watchPods(ctx); err != nil {
		return err
	}
	return n.waitSchedulable(ctx)
}

// watchPods runs the informer of the pods bound to this node.
func (n *Node) watchPods(ctx context.Context) error {
	lw := cache.NewListWatchFromClient(n.client.CoreV1().RESTClient(), "pods", corev1.NamespaceAll,
		fields.OneTermEqualSelector("spec.nodeName", n.opts.Name))
	informer := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.podSeen(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { n.podSeen(obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				n.podGone(pod)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	n.bg.Add(1)
	go func() { defer n.bg.Done(); informer.Run(n.ctx.Done()) }()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return errors.New("the pod informer did not sync")
	}
	return nil
}

func (n *Node) podSeen(pod *corev1.Pod) {
	if pod.Spec.NodeName != n.opts.Name {
		return
	}
	n.mu.Lock()
	r, ok := n.runners[pod.UID]
	if !ok && n.stopping {
		n.mu.Unlock()
		return
	}
	if !ok {
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			n.mu.Unlock()
			return // ran before, on an earlier agent: nothing to do
		}
		r = newPodRunner(n, pod)
		n.runners[pod.UID] = r
		n.mu.Unlock()
		go func() {
			r.run()
			n.mu.Lock()
			delete(n.runners, pod.UID)
			n.mu.Unlock()
		}()
		r.update(pod)
		return
	}
	n.mu.Unlock()
	r.update(pod)
}

func (n *Node) podGone(pod *corev1.Pod) {
	n.mu.Lock()
	r, ok := n.runners[pod.UID]
	n.mu.Unlock()
	if !ok {
		return
	}
	grace := n.opts.StopGrace
	if pod.DeletionGracePeriodSeconds != nil {
		grace = min(grace, time.Duration(*pod.DeletionGracePeriodSeconds)*time.Second)
	}
	r.requestTermination(grace, true)
}

// Stop stops every pod's processes (within Options.StopGrace), removes
// the Node from the control plane and the node's directory. It is safe to
// call more than once.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() {
		var errs []error
		n.mu.Lock()
		n.stopping = true
		runners := make([]*podRunner, 0, len(n.runners))
		for _, r := range n.runners {
			runners = append(runners, r)
		}
		n.mu.Unlock()
		for _, r := range runners {
			r.mu.Lock()
			r.objectGone = true // the node leaves; the pods stay for the API to decide
			r.mu.Unlock()
			r.requestTermination(min(n.opts.StopGrace, r.terminationGrace()), true)
		}
		for _, r := range runners {
			<-r.done
		}
		n.cancel()
		n.bg.Wait()
		if n.objects != nil {
			n.objects.stopAll()
		}
		if n.broadcast != nil {
			n.broadcast.Shutdown()
		}
		if n.admin != nil {
			if err := n.unregister(); err != nil {
				errs = append(errs, err)
			}
		}
		if n.opts.KeepDir {
			n.logf("node %s stopped; kept %s", n.opts.Name, n.dir)
		} else if err := os.RemoveAll(n.dir); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", n.dir, err))
		}
		n.stopErr = errors.Join(errs...)
	})
	return n.stopErr
}

// Name is the Node's name.
func (n *Node) Name() string { return n.opts.Name }

// Dir holds the pods' directories (volumes) and the containers' logs.
func (n *Node) Dir() string { return n.dir }

func (n *Node) scratchDir() string { return filepath.Join(n.dir, "scratch") }

// runner returns the runner of the pod of that name running now.
func (n *Node) runner(pod types.NamespacedName) *podRunner {
	n.mu.Lock()
	defer n.mu.Unlock()
	var found *podRunner
	for _, r := range n.runners {
		if r.key == pod {
			select {
			case <-r.termCh:
				if found == nil {
					found = r
				}
			default:
				return r
			}
		}
	}
	return found
}

// PortOf returns the host port on which container of pod listens for its
// declared containerPort (or, for a flagd container, for a flagd port its
// arguments left at the default). See "Ports" in the package documentation.
func (n *Node) PortOf(pod types.NamespacedName, container string, containerPort int32) (int, bool) {
	r := n.runner(pod)
	if r == nil || r.ports == nil {
		return 0, false
	}
	return r.ports.portOf(container, containerPort)
}

// Addr is PortOf as "127.0.0.1:port", for a client to dial.
func (n *Node) Addr(pod types.NamespacedName, container string, containerPort int32) (string, bool) {
	p, ok := n.PortOf(pod, container, containerPort)
	if !ok {
		return "", false
	}
	return net.JoinHostPort(n.facts.ip, strconv.Itoa(p)), true
}

// PID returns the process id of the container's current process.
func (n *Node) PID(pod types.NamespacedName, containerName string) (int, bool) {
	r := n.runner(pod)
	if r == nil {
		return 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range append(append([]*container{}, r.initContainers...), r.containers...) {
		if c.spec.Name == containerName && c.proc != nil && c.proc.Running() {
			return c.proc.Pid(), true
		}
	}
	return 0, false
}

// Logs returns everything the container of a running pod wrote to stdout
// and stderr, every run of it in order. LogsOf also covers deleted pods.
func (n *Node) Logs(pod types.NamespacedName, container string) (string, error) {
	r := n.runner(pod)
	if r == nil {
		return "", fmt.Errorf("pod %s does not run on node %s", pod, n.opts.Name)
	}
	return readLogs(filepath.Join(r.logDir, container))
}

// LogsOf returns the logs of every container of every pod of namespace
// that ran on the node, deleted pods included, headed by pod and
// container: what a failed spec should show.
func (n *Node) LogsOf(namespace string) string {
	root := filepath.Join(n.dir, "logs")
	pods, _ := os.ReadDir(root) // sorted by name
	var b strings.Builder
	for _, p := range pods {
		if !strings.HasPrefix(p.Name(), namespace+"_") {
			continue
		}
		containers, _ := os.ReadDir(filepath.Join(root, p.Name()))
		for _, c := range containers {
			logs, err := readLogs(filepath.Join(root, p.Name(), c.Name()))
			if err != nil {
				logs = err.Error()
			}
			fmt.Fprintf(&b, "==> %s / %s <==\n%s\n", p.Name(), c.Name(), logs)
		}
	}
	return b.String()
}

func readLogs(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("no logs: %w", err)
	}
	runs := make([]int, 0, len(entries))
	for _, e := range entries {
		if i, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".log")); err == nil {
			runs = append(runs, i)
		}
	}
	slices.Sort(runs)
	var b strings.Builder
	for _, i := range runs {
		data, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(i)+".log"))
		if err != nil {
			return "", err
		}
		if len(runs) > 1 {
			fmt.Fprintf(&b, "--- run %d ---\n", i)
		}
		b.Write(data)
	}
	return b.String(), nil
}

// imageID identifies what runs for an image: the binary and its digest.
func (n *Node) imageID(kind runtimeKind, binary string) (string, error) {
	if kind == runPlaceholder {
		return "flagplane-node://placeholder", nil
	}
	n.imageMu.Lock()
	defer n.imageMu.Unlock()
	if id, ok := n.imageIDs[binary]; ok {
		return id, nil
	}
	f, err := os.Open(binary)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", binary, err)
	}
	id := "flagplane-node://" + filepath.Base(binary) + "@sha256:" + hex.EncodeToString(h.Sum(nil))
	n.imageIDs[binary] = id
	return id, nil
}

func (n *Node) event(ref *corev1.ObjectReference, eventType, reason, format string, args ...any) {
	if n.recorder != nil {
		n.recorder.Eventf(ref, eventType, reason, format, args...)
	}
}

func (n *Node) logf(format string, args ...any) {
	fmt.Fprintf(n.opts.Log, "node: "+format+"\n", args...)
}
