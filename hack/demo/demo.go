package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	_ "embed"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/cmd/manager/app"
	"github.com/flagplane/flagplane/inspect/explain"
	"github.com/flagplane/flagplane/inspect/topodump"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/node"
	"github.com/flagplane/flagplane/test/operator"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
)

//go:embed extra.yaml
var extraManifests []byte

type demo struct {
	o    options
	out  io.Writer
	root string
	// podAddrs reaches the test node's pods for the manager.
	podAddrs node.Addresses

	cp         *controlplane.ControlPlane
	node       *node.Node
	mgr        *app.Manager
	metricsURL string
	logPath    string
	// logs receives what controller-runtime and klog log: kept in memory
	// until the file at logPath is opened, then written there.
	logs *lateFile

	timings []timing

	// podKey is the Pod of shop-web the demo evaluates flags in, and
	// flagdAddr where its flagd listens on the test node.
	podKey    types.NamespacedName
	flagdAddr string
	// editedAt is when the demo edited the flag.
	editedAt time.Time
	// revisionBefore is the flag set's revision before the edit.
	revisionBefore string
}

// lateFile is a writer whose file is opened after the first writes: they
// wait in memory (up to lateFileMemory bytes) and are written first.
type lateFile struct {
	mu      sync.Mutex
	pending bytes.Buffer
	f       *os.File
	closed  bool
}

// lateFileMemory bounds what waits for the file.
const lateFileMemory = 4 << 20

func (l *lateFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		return l.f.Write(p)
	}
	if !l.closed && l.pending.Len()+len(p) <= lateFileMemory {
		l.pending.Write(p)
	}
	return len(p), nil
}

// open creates the file at path and writes what waited for it.
func (l *lateFile) open(path string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating the operator's log: %w", err)
	}
	if _, err := l.pending.WriteTo(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing the operator's log %s: %w", path, err)
	}
	l.f = f
	return nil
}

// Close closes the file; what is written afterwards is dropped.
func (l *lateFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.pending.Reset()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

type timing struct {
	what string
	d    time.Duration
}

func newDemo(o options, out io.Writer) *demo { return &demo{o: o, out: out} }

func (d *demo) step(format string, args ...any) {
	fmt.Fprintf(d.out, "\n==> "+format+"\n", args...)
}

func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "    "+format+"\n", args...)
}

// block prints text indented.
func (d *demo) block(text string) {
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintln(d.out, "    │ "+l)
	}
}

func (d *demo) measured(what string, dur time.Duration) {
	d.timings = append(d.timings, timing{what, dur})
}

func (d *demo) run(ctx context.Context) (err error) {
	began := time.Now()
	if d.root, err = findRoot(); err != nil {
		return err
	}
	fmt.Fprintln(d.out, "flagplane demo: an operator for OpenFeature flags, on a local control plane")
	// The logger before anything logs: the control plane (envtest) logs
	// through controller-runtime's logger long before the operator starts,
	// and controller-runtime prints a stack trace for a line logged before
	// SetLogger. The lines are kept until the log file exists (startOperator).
	d.logs = &lateFile{}
	logger := zap.New(zap.WriteTo(d.logs), zap.UseDevMode(true))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)

	if !d.o.skipBuild {
		d.step("Building what is missing (make controlplane realclients)")
		if err := d.build(ctx); err != nil {
			return err
		}
	}

	if err := d.startControlPlane(ctx); err != nil {
		return err
	}
	defer d.stopControlPlane()

	stopOperator, err := d.startOperator(ctx)
	if err != nil {
		return err
	}
	defer stopOperator()

	if err := d.startNode(ctx); err != nil {
		return err
	}
	defer d.stopNode()

	if err := d.applySamples(ctx); err != nil {
		return err
	}
	if err := d.showConfigMap(ctx); err != nil {
		return err
	}
	if err := d.showPod(ctx); err != nil {
		return err
	}
	if err := d.showSourceStatus(ctx); err != nil {
		return err
	}
	if err := d.showFlagd(ctx); err != nil {
		return err
	}
	if err := d.writeTopology(ctx); err != nil {
		return err
	}
	if err := d.explainAndPreview(ctx); err != nil {
		return err
	}
	if err := d.previewAnswers(ctx); err != nil {
		return err
	}
	if err := d.addStreamingWorkload(ctx); err != nil {
		return err
	}
	if err := d.editFlag(ctx); err != nil {
		return err
	}
	if err := d.flagdFollowsEdit(ctx); err != nil {
		return err
	}
	if err := d.showDelivery(ctx); err != nil {
		return err
	}
	if err := d.showPolicy(ctx); err != nil {
		return err
	}
	if err := d.showHealth(ctx); err != nil {
		return err
	}
	if err := d.showStaged(ctx); err != nil {
		return err
	}
	d.summary(time.Since(began))
	return d.hold(ctx)
}

// build runs `make controlplane`, which builds etcd, kube-apiserver,
// kube-controller-manager and kubectl from their Go modules when they are
// missing, streaming its output and a progress line every 30 seconds.
func (d *demo) build(ctx context.Context) error {
	start := time.Now()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "controlplane", "realclients")
	cmd.Dir = d.root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) } // make and the go builds under it
	cmd.WaitDelay = 10 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("running make (is GNU make installed?): %w", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	lines := 0
	go func() {
		defer wg.Done()
		s := bufio.NewScanner(pr)
		for s.Scan() {
			lines++
			d.say("%s", s.Text())
		}
	}()
	done := make(chan error, 1)
	go func() {
		done <- cmd.Wait()
		_ = pw.Close() // an io.PipeWriter's Close returns nil
	}()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			wg.Wait()
			if ctx.Err() != nil {
				return errInterrupted
			}
			if err != nil {
				return fmt.Errorf("make controlplane realclients: %w", err)
			}
			d.say("binaries ready in bin/ (%s)", time.Since(start).Round(time.Second))
			d.measured("build (make controlplane realclients)", time.Since(start))
			return nil
		case <-tick.C:
			d.say("... still building, %s so far (a first build takes about 6-8 minutes and 3 GB of memory on 2 cores; it happens once per machine)",
				time.Since(start).Round(time.Second))
		}
	}
}

func (d *demo) startControlPlane(ctx context.Context) error {
	d.step("Starting the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)")
	opts := controlplane.Options{
		RootDir:   d.root,
		BinDir:    filepath.Join(d.root, "bin"),
		Log:       prefixWriter{w: d.out, prefix: "    "},
		Scheduler: true,
		// ReferenceGrant, which lets the staged-delivery scene's namespaces
		// read a flag set of the demo's namespace.
		GatewayAPI: true,
	}
	// envtest installs config/webhook's configurations pointing at this
	// process; the manager keeps their certificate and caBundle itself, as
	// in a cluster.
	opts.WebhookInstallOptions = operator.WebhookInstallOptions(d.root)
	cp, err := controlplane.Start(ctx, opts)
	if err != nil {
		if ctx.Err() != nil {
			return errInterrupted
		}
		return err
	}
	d.cp = cp
	d.measured("control plane start", cp.Timings.Total)
	d.say("")
	d.say("kubeconfig: %s", cp.KubeconfigPath)
	d.say("use kubectl meanwhile, e.g.:")
	d.say("  export KUBECONFIG=%s", cp.KubeconfigPath)
	d.say("  %s get featureflags,featureflagsources,configmaps,pods -n %s", relativeKubectl(d.root, cp.KubectlPath), d.o.namespace)
	return nil
}

func (d *demo) stopControlPlane() {
	if err := d.cp.Stop(); err != nil {
		d.say("stopping the control plane: %v", err)
	}
}

// startOperator runs the manager in this process against the control plane,
// as the integration suites do (test/operator), with its default options
// but for what a laptop needs. It returns a function that stops it and
// waits until it has.
func (d *demo) startOperator(ctx context.Context) (func(), error) {
	d.step("Starting the operator (in this process: the manager of cmd/manager, its default options, admission included)")
	d.logPath = filepath.Join(d.cp.Dir, "flagplane.log")
	if err := d.logs.open(d.logPath); err != nil {
		return nil, err
	}
	op, err := operator.Start(ctx, d.cp, operator.Options{
		// The built-in flagd sync server, on as in config/default:
		// flagd-proxy sources work, with the namespace-token key the
		// manager generates into a Secret of its namespace.
		SyncServer: true, TokenKeySecret: true,
		// The test node's pods are reached through ports of this host.
		PodAddress: d.podAddrs.PodAddress,
		Configure: func(o *app.Options) {
			// Ports the kernel picks, read back once bound. Plain HTTP on
			// loopback, so that the demo's links open in a browser; an
			// installed manager serves them over HTTPS to authorized
			// callers only.
			o.MetricsBindAddress, o.HealthProbeBindAddress = "127.0.0.1:0", "127.0.0.1:0"
			o.MetricsSecure = false
		},
	})
	if err != nil {
		_ = d.logs.Close()
		if ctx.Err() != nil {
			return nil, errInterrupted
		}
		return nil, fmt.Errorf("starting the operator (log: %s): %w", d.logPath, err)
	}
	d.mgr = op.Manager
	stop := func() {
		start := time.Now()
		if err := op.Stop(); err != nil {
			d.say("operator stopped with: %v", err)
		}
		d.say("operator stopped in %s", time.Since(start).Round(time.Millisecond))
		_ = d.logs.Close()
	}
	opts, addrs := op.Options, op.Addresses()
	d.measured("operator ready (topology built, every generated object reconciled once)", op.Timings.Ready)
	d.metricsURL = "http://" + addrs.Metrics
	d.say("ready in %s: topology built from the caches", op.Timings.Ready.Round(time.Millisecond))
	d.say("metrics:  %s/metrics", d.metricsURL)
	d.say("topology: %s%s (Graphviz DOT)", d.metricsURL, app.TopologyPath)
	d.say("probes:   http://%s/readyz", addrs.Health)
	d.say("sync:     %s (flagd.sync.v1, for flagd-proxy sources; key in Secret %s/%s)", op.SyncAddress, operator.Namespace, opts.Sync.NamespaceTokenKeySecret)
	d.say("log:      %s", d.logPath)
	d.measured("admission webhooks trusted by the API server", op.Timings.Admission)
	d.say("admission webhooks: served on https://%s, certificate in Secret %s/%s, caBundle injected",
		addrs.Webhook, operator.Namespace, opts.Admission.SecretName)
	return stop, nil
}

func (d *demo) kubectl(stdin []byte, args ...string) (string, error) {
	var in io.Reader
	if stdin != nil {
		in = bytes.NewReader(stdin)
	}
	return d.cp.KubectlWithInput(in, args...)
}

func (d *demo) applySamples(ctx context.Context) error {
	ns := d.o.namespace
	d.step("Applying config/samples to namespace %s", ns)
	if _, err := d.kubectl(nil, "create", "namespace", ns); err != nil {
		return err
	}
	// Pods are admitted once the namespace's default ServiceAccount exists.
	if err := d.poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		err := d.cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, client.IgnoreNotFound(err)
	}); err != nil {
		return fmt.Errorf("waiting for the default ServiceAccount of %s: %w", ns, err)
	}
	samples := filepath.Join(d.root, "config", "samples")
	// The flag set and the source first, so that the first Pod of the
	// Deployment is admitted with the source already in the graph.
	out, err := d.kubectl(nil, "apply", "-n", ns, "-f", filepath.Join(samples, "featureflag.yaml"), "-f", filepath.Join(samples, "featureflagsource.yaml"))
	if err != nil {
		return err
	}
	d.block(out)
	if err := d.poll(ctx, 30*time.Second, func(context.Context) (bool, error) {
		_, ok := d.mgr.Controller.Topology().Snapshot().Source(topology.SourceKey(ns, "shop"))
		return ok, nil
	}); err != nil {
		return fmt.Errorf("waiting for the source in the topology: %w", err)
	}
	if out, err = d.kubectl(nil, "apply", "-n", ns, "-f", filepath.Join(samples, "deployment.yaml")); err != nil {
		return err
	}
	d.block(out)
	d.say("and a second source that selects a StatefulSet by label, with flagd reading the FeatureFlag itself (provider kubernetes):")
	if out, err = d.kubectl(extraManifests, "apply", "-n", ns, "-f", "-"); err != nil {
		return err
	}
	d.block(out)
	return nil
}

func (d *demo) showConfigMap(ctx context.Context) error {
	flags := topology.FlagSetKey(d.o.namespace, "shop-flags")
	key := client.ObjectKey{Namespace: d.o.namespace, Name: topology.ConfigMapName(flags)}
	d.step("The ConfigMap flagplane generated: %s/%s", key.Namespace, key.Name)
	start := time.Now()
	cm := &corev1.ConfigMap{}
	if err := d.poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		err := d.cp.Client.Get(ctx, key, cm)
		return err == nil, client.IgnoreNotFound(err)
	}); err != nil {
		return fmt.Errorf("waiting for the ConfigMap: %w", err)
	}
	d.say("(there %s after the apply)", time.Since(start).Round(time.Millisecond))
	meta := map[string]any{"name": cm.Name, "namespace": cm.Namespace, "labels": cm.Labels}
	if len(cm.OwnerReferences) > 0 {
		var owners []string
		for _, o := range cm.OwnerReferences {
			owners = append(owners, o.Kind+"/"+o.Name)
		}
		meta["ownerReferences"] = owners
	}
	b, _ := yaml.Marshal(map[string]any{"metadata": meta})
	d.block(string(b))
	dataKey := topology.ConfigMapDataKey(flags)
	d.block("data:\n  " + dataKey + ": |")
	d.block(indentJSON(cm.Data[dataKey], "    "))
	return nil
}

// showPod shows what admission added to a Pod that the ReplicaSet controller
// created for the sample Deployment: everything in the Pod that its
// template does not have.
func (d *demo) showPod(ctx context.Context) error {
	ns := d.o.namespace
	d.step("A Pod of Deployment %s/shop-web, created by the ReplicaSet controller", ns)
	dep := &appsv1.Deployment{}
	if err := d.cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-web"}, dep); err != nil {
		return err
	}
	tmpl := dep.Spec.Template.Spec
	var pod *corev1.Pod
	wantInjection := true
	err := d.poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := d.cp.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "shop-web"}); err != nil {
			return false, err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if metav1.GetControllerOf(p) == nil || metav1.GetControllerOf(p).Kind != "ReplicaSet" {
				continue
			}
			pod = p
			if !wantInjection || len(addedByInjection(dep.Spec.Template.ObjectMeta, tmpl, p)) > 0 {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil && pod == nil {
		return fmt.Errorf("waiting for a Pod of shop-web: %w", err)
	}
	d.say("pod/%s (owner: ReplicaSet/%s)", pod.Name, metav1.GetControllerOf(pod).Name)
	added := addedByInjection(dep.Spec.Template.ObjectMeta, tmpl, pod)
	if len(added) == 0 {
		d.say("nothing was injected into this Pod: see %s", d.logPath)
		return nil
	}
	b, _ := yaml.Marshal(added)
	d.say("injected by flagplane's admission webhook (what the Pod has beyond its template):")
	d.block(string(b))

	if err := d.poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		if err := d.cp.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		return podReady(pod), nil
	}); err != nil {
		return fmt.Errorf("waiting for pod %s to be Ready on the test node (its logs: %s): %w", pod.Name, d.node.Dir(), err)
	}
	d.podKey = types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	d.say("scheduled by kube-scheduler onto node %s and Ready %s later: its flagd runs there as the real flagd binary,", pod.Spec.NodeName, time.Since(pod.CreationTimestamp.Time).Round(100*time.Millisecond))
	d.say("with the Pod's arguments, environment and ConfigMap volume, its ports moved to free host ports (test/node: no pod network)")
	got, err := d.evaluate(ctx, "new-checkout")
	if err != nil {
		return err
	}
	d.say("$ curl -X POST http://%s/flagd.evaluation.v1.Service/ResolveBoolean -d '{\"flagKey\":\"new-checkout\"}'", d.flagdAddr)
	d.say("%s", got)
	return nil
}

func (d *demo) showSourceStatus(ctx context.Context) error {
	key := client.ObjectKey{Namespace: d.o.namespace, Name: "shop"}
	d.step("The status of FeatureFlagSource %s/%s", key.Namespace, key.Name)
	src := &v1beta1.FeatureFlagSource{}
	if err := d.poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		if err := d.cp.Client.Get(ctx, key, src); err != nil {
			return false, err
		}
		return src.Status.ObservedGeneration == src.Generation && src.Status.TargetCount > 0, nil
	}); err != nil {
		return fmt.Errorf("waiting for the source's status: %w", err)
	}
	out, err := d.kubectl(nil, "get", "featureflagsources", "-n", key.Namespace)
	if err != nil {
		return err
	}
	d.say("$ kubectl get featureflagsources -n %s", key.Namespace)
	d.block(out)
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONDITION\tSTATUS\tREASON\tMESSAGE")
	for _, c := range src.Status.Conditions {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	_ = tw.Flush()
	d.say("conditions of shop (observedGeneration %d):", src.Status.ObservedGeneration)
	d.block(b.String())
	var targets []string
	for _, t := range src.Status.Targets {
		targets = append(targets, t.Kind+"/"+t.Name)
	}
	d.say("targets (%d): %s", src.Status.TargetCount, strings.Join(targets, ", "))
	return nil
}

func (d *demo) writeTopology(ctx context.Context) error {
	d.step("The topology, from the operator's %s", app.TopologyPath)
	dot, err := topodump.FromURL(ctx, d.metricsURL, topodump.URLOptions{})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.o.outDir, 0o755); err != nil {
		return err
	}
	dotPath := filepath.Join(d.o.outDir, "topology.dot")
	if err := os.WriteFile(dotPath, dot, 0o644); err != nil {
		return err
	}
	d.block(string(dot))
	counts := d.mgr.Controller.Topology().Snapshot().Counts()
	var parts []string
	for _, k := range []topology.Kind{topology.KindSource, topology.KindFlagSet, topology.KindConfigMap,
		topology.KindDeployment, topology.KindStatefulSet, topology.KindDaemonSet, topology.KindInProcessConfig, topology.KindFlagd} {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	d.say("nodes: %s", strings.Join(parts, ", "))
	d.say("wrote %s", dotPath)
	// Drawn in Go: no Graphviz to install.
	svg, err := topodump.Render(ctx, dot, "svg")
	if err != nil {
		return err
	}
	svgPath := filepath.Join(d.o.outDir, "topology.svg")
	if err := os.WriteFile(svgPath, svg, 0o644); err != nil {
		return err
	}
	d.say("wrote %s", svgPath)
	d.say("the same from any manager: flagplane topology --url %s --format svg -o topology.svg", d.metricsURL)
	return nil
}

// explainAndPreview shows `flagplane explain` on the sample Deployment and
// the warning the FeatureFlag webhook gives a server-side dry run of the
// edit that follows: what it will reach, before it is made.
func (d *demo) explainAndPreview(ctx context.Context) error {
	ns := d.o.namespace
	d.step("Why does Deployment %s/shop-web get these flags? (flagplane explain, from the API with the demo's credentials)", ns)
	d.say("$ flagplane explain deployment/shop-web -n %s", ns)
	text, err := d.explain(ctx, "deployment", ns, "shop-web")
	if err != nil {
		return err
	}
	d.block(text)

	d.step("What will the edit reach? (a server-side dry run: the webhook answers from the graph, nothing is stored)")
	patch := `{"spec":{"flagSpec":{"flags":{"new-checkout":{"defaultVariant":"on"}}}}}`
	d.say("$ kubectl patch featureflag shop-flags -n %s --type merge -p '%s' --dry-run=server", ns, patch)
	cmd := exec.CommandContext(ctx, d.cp.KubectlPath, "--kubeconfig="+d.cp.KubeconfigPath,
		"patch", "featureflag", "shop-flags", "-n", ns, "--type", "merge", "-p", patch, "--dry-run=server")
	cmd.Env = append(os.Environ(), "KUBERC=off")
	combined, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("the dry run: %w: %s", err, combined)
	}
	d.block(string(combined))
	return nil
}

// explain is `flagplane explain KIND/NAME -n NS` over the graph read from
// the API with the demo's credentials, as text.
func (d *demo) explain(ctx context.Context, kind, ns, name string) (string, error) {
	top, err := topodump.LoadCluster(ctx, d.cp.Config, topodump.ClusterOptions{Namespaces: []string{ns}})
	if err != nil {
		return "", fmt.Errorf("reading the graph for explain: %w", err)
	}
	report, err := explain.Explain(top.Snapshot(), kind, ns, name, injection.DefaultOptions())
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	if err := explain.Write(&out, report, "text"); err != nil {
		return "", err
	}
	return out.String(), nil
}

// editFlag flips the default variant of new-checkout and measures how long
// the ConfigMap takes to follow.
func (d *demo) editFlag(ctx context.Context) error {
	ns := d.o.namespace
	flags := topology.FlagSetKey(ns, "shop-flags")
	key := client.ObjectKey{Namespace: ns, Name: topology.ConfigMapName(flags)}
	dataKey := topology.ConfigMapDataKey(flags)
	d.step("Editing a flag: new-checkout's defaultVariant from \"off\" to \"on\"")
	d.say("$ kubectl patch featureflag shop-flags -n %s --type merge -p '{\"spec\":{\"flagSpec\":{\"flags\":{\"new-checkout\":{\"defaultVariant\":\"on\"}}}}}'", ns)
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-flags"}}
	patch := []byte(`{"spec":{"flagSpec":{"flags":{"new-checkout":{"defaultVariant":"on"}}}}}`)
	start := time.Now()
	d.editedAt = start
	if err := d.cp.Client.Patch(ctx, ff, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("editing the flag: %w", err)
	}
	var content string
	if err := d.poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		if err := d.cp.Client.Get(ctx, key, cm); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		content = cm.Data[dataKey]
		return defaultVariant(content, "new-checkout") == "on", nil
	}); err != nil {
		return fmt.Errorf("waiting for the ConfigMap to follow: %w", err)
	}
	took := time.Since(start)
	d.measured("flag edit to ConfigMap", took)
	d.say("the ConfigMap followed in %s:", took.Round(time.Millisecond))
	var doc struct {
		Flags map[string]json.RawMessage `json:"flags"`
	}
	if err := json.Unmarshal([]byte(content), &doc); err == nil {
		d.block(`"new-checkout": ` + indentJSON(string(doc.Flags["new-checkout"]), ""))
	}
	if d.flagdAddr == "" {
		return nil
	}
	var got string
	if err := d.poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		got, err = d.evaluate(ctx, "new-checkout")
		return err == nil && strings.Contains(got, `"variant":"on"`), nil
	}); err != nil {
		return fmt.Errorf("waiting for the pod's flagd to serve the edit: %w", err)
	}
	took = time.Since(start)
	d.measured("flag edit to the pod's flagd serving it", took)
	d.say("and the Pod's flagd serves it %s after the edit (the test node projects a ConfigMap on its watch event; a real kubelet syncs within a minute or so):", took.Round(time.Millisecond))
	d.say("%s", got)
	return nil
}

func (d *demo) summary(total time.Duration) {
	d.step("Done in %s", total.Round(100*time.Millisecond))
	for _, t := range d.timings {
		d.say("%-62s %s", t.what, t.d.Round(time.Millisecond))
	}
}

// hold keeps everything running for kubectl: until Ctrl-C when standard
// input is a terminal, for -hold when given, else not at all.
func (d *demo) hold(ctx context.Context) error {
	var wait <-chan time.Time
	switch {
	case d.o.holdSet && d.o.hold <= 0:
		return nil
	case d.o.holdSet:
		d.say("")
		d.say("the control plane and the operator keep running for %s (Ctrl-C stops them sooner)", d.o.hold)
		d.say("  export KUBECONFIG=%s", d.cp.KubeconfigPath)
		wait = time.After(d.o.hold)
	case isTerminal(os.Stdin):
		d.say("")
		d.say("the control plane and the operator keep running: press Ctrl-C to stop them")
		d.say("  export KUBECONFIG=%s", d.cp.KubeconfigPath)
	default:
		d.say("standard input is not a terminal: stopping now (-hold 10m keeps everything running for 10 minutes)")
		return nil
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(d.out)
		d.say("Ctrl-C: stopping")
	case <-wait:
		d.say("-hold elapsed: stopping")
	}
	return nil
}

func (d *demo) poll(ctx context.Context, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil && (apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err)) {
			return false, nil
		}
		return ok, err
	})
	if err != nil && ctx.Err() != nil {
		return errInterrupted
	}
	return err
}
