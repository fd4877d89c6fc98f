package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/internal/scratch"
	"github.com/flagplane/flagplane/test/node/internal/mountns"
)

// Node is a running agent. See the package documentation.
type Node struct {
	opts Options
	dir  string
	// scratch is dir, locked for as long as this process lives.
	scratch *scratch.Dir
	cp      *controlplane.ControlPlane
	client  kubernetes.Interface // as the node's own user
	admin   kubernetes.Interface // for setting up and removing the node only

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
	// A directory a dead run left (its pods' files, its logs) goes first.
	scratchDir, err := scratch.Make("flagplane-node-")
	if err != nil {
		return nil, fmt.Errorf("creating the node's directory: %w", err)
	}
	dir := scratchDir.Path
	// The pods' directories are bind-mounted into processes that may run
	// as any user: the path to them must be traversable.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	n := &Node{opts: opts, dir: dir, scratch: scratchDir, cp: cp, runners: map[types.UID]*podRunner{}, imageIDs: map[string]string{}}
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
			if err := n.scratch.Keep(); err != nil {
				errs = append(errs, fmt.Errorf("keeping %s: %w", n.dir, err))
			}
			n.logf("node %s stopped; kept %s", n.opts.Name, n.dir)
		} else if err := n.scratch.Remove(); err != nil {
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

func (n *Node) event(ref *corev1.ObjectReference, eventType, reason, format string, args ...any) {
	if n.recorder != nil {
		n.recorder.Eventf(ref, eventType, reason, format, args...)
	}
}

func (n *Node) logf(format string, args ...any) {
	fmt.Fprintf(n.opts.Log, "node: "+format+"\n", args...)
}
