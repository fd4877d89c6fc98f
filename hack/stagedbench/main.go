// Command stagedbench measures staged delivery's gates at scale, and what a
// hostile tenant costs the others, on a real control plane (etcd and
// kube-apiserver of test/controlplane) with the manager binary of
// cmd/manager running as a process of its own, and prints markdown tables:
//
//   - tenant A: a FeatureFlag read by 1,000 consumer namespaces, each with a
//     Deployment of 10 pods (10,000 pods), under a rollout policy with an
//     EvaluationErrors gate, whose rollout waits at a step that holds every
//     consumer. Every pod's flagd management port is a black hole: a
//     listener of this process that accepts and never answers. Over a
//     minute: the rollout queue's reconcile time (the manager's
//     controller_runtime_reconcile_time_seconds) and the reads that reach
//     the black hole;
//
//   - tenant B: a FeatureFlag read by two namespaces, one pod each, whose
//     flagd is a fake of this process answering flagd's metrics; its
//     policy's EvaluationErrors gate (max 0) is made to fail, and the time
//     from the error to the policy's Halted status (as a watch sees it) is
//     measured: first while tenant A is idle (the baseline), then while A
//     black-holes its 10,000 pods. Goal: within 10 s.
//
//     go run ./hack/stagedbench [-namespaces 1000] [-pods 10] [-trials 3]
//
// Pods are objects this command writes (no kube-controller-manager, no
// kubelet): their spec carries the injected flagd sidecar, their status a
// Ready condition and the IP 127.0.0.1, where the manager reads each pod's
// port as in production (the pod's IP and its sidecar's management port).
// Progress goes to stderr, the tables to stdout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/managerproc"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/staging"
)

// goalHalt is the goal for tenant B's halt while A black-holes.
const goalHalt = 10 * time.Second

type options struct {
	namespaces, pods, trials, parallel int
	// hostile is how many flag sets tenant A has, each read by all its
	// consumers and staged by a policy of its own.
	hostile             int
	window, haltTimeout time.Duration
	// pausedTimeout bounds the wait for tenant A's rollouts to reach
	// their approval.
	pausedTimeout time.Duration
	// quiet is how long the cost of a cluster whose pods all confirmed is
	// watched.
	quiet time.Duration
	// manager is a manager binary to run instead of building cmd/manager
	// (an earlier version's, to compare).
	manager string
}

func main() {
	var o options
	flag.IntVar(&o.namespaces, "namespaces", 1000, "tenant A's consumer namespaces")
	flag.IntVar(&o.pods, "pods", 10, "pods per consumer namespace of tenant A")
	flag.IntVar(&o.trials, "trials", 3, "halts of tenant B measured, idle and under load each")
	flag.IntVar(&o.hostile, "hostile-policies", 1, "tenant A's flag sets, each read by all its consumers under a policy of its own")
	flag.IntVar(&o.parallel, "parallel", 32, "objects created at once")
	flag.DurationVar(&o.window, "window", time.Minute, "how long tenant A's reconciles and reads are counted")
	flag.DurationVar(&o.haltTimeout, "halt-timeout", 3*time.Minute, "how long a halt of tenant B is waited for before it counts as not seen")
	flag.DurationVar(&o.quiet, "quiet", 30*time.Second, "how long the manager's reads and CPU are counted once every pod confirmed tenant A's edit")
	flag.DurationVar(&o.pausedTimeout, "paused-timeout", 10*time.Minute, "how long tenant A's rollouts are waited for to reach their approval before A is measured as it stands")
	flag.StringVar(&o.manager, "manager", "", "a manager binary to run instead of building cmd/manager (an earlier version's, to compare)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ok, err := run(ctx, o, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "stagedbench:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(3)
	}
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

type bench struct {
	o       options
	c       client.Client
	manager *managerproc.Process
	// unstaged is how long tenant A's edit took to reach every consumer
	// without a policy.
	unstaged time.Duration
	// edits counts tenant B's edits, each a new content.
	edits int
	// blackHole counts the connections tenant A's pods got; fake is
	// tenant B's flagd, whose error count the bench sets.
	blackHole *blackHole
	fake      *fakeFlagd
	// sync is every pod's flagd sync service, which the manager asks what
	// the pod serves; confirmed, what the unstaged edit's confirmation cost.
	sync      *fakeSync
	confirmed confirmResult
}

func run(ctx context.Context, o options, out io.Writer) (bool, error) {
	dir, err := os.MkdirTemp("", "flagplane-stagedbench-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	root, err := os.Getwd()
	if err != nil {
		return false, err
	}
	b := &bench{o: o}
	if b.blackHole, err = newBlackHole(); err != nil {
		return false, err
	}
	defer b.blackHole.close()
	if b.fake, err = newFakeFlagd(); err != nil {
		return false, err
	}
	defer b.fake.close()
	if b.sync, err = newFakeSync(); err != nil {
		return false, err
	}
	defer b.sync.close()

	progress("starting the control plane (etcd, kube-apiserver; no kube-controller-manager) and building cmd/manager")
	built := make(chan error, 1)
	var binary string
	go func() {
		if o.manager != "" {
			binary = o.manager
			built <- nil
			return
		}
		var err error
		binary, err = managerproc.Build(ctx, root, dir)
		built <- err
	}()
	cp, err := controlplane.Start(ctx, controlplane.Options{NoControllerManager: true, GatewayAPI: true, Log: io.Discard})
	if err != nil {
		return false, err
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			progress("stopping the control plane: %v", err)
		}
	}()
	if err := <-built; err != nil {
		return false, err
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS = -1
	if b.c, err = client.New(cfg, client.Options{Scheme: cp.Scheme}); err != nil {
		return false, err
	}

	if err := b.setUp(ctx, binary, cp.KubeconfigPath, dir); err != nil {
		return false, err
	}
	defer func() { _ = b.manager.Stop() }()
	return b.measure(ctx, out)
}

// setUp creates both tenants, starts the manager, and attaches both
// policies.
func (b *bench) setUp(ctx context.Context, binary, kubeconfig, dir string) error {
	if err := b.tenant(ctx, "a", b.o.namespaces, b.o.pods, b.blackHole.port); err != nil {
		return err
	}
	if err := b.tenant(ctx, "b", 2, 1, b.fake.port); err != nil {
		return err
	}
	var err error
	b.manager, err = managerproc.Start(managerproc.Options{Binary: binary, Name: "manager", Kubeconfig: kubeconfig, Dir: dir,
		Args: []string{"--webhooks=false"}})
	if err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := b.manager.WaitReady(waitCtx); err != nil {
		return fmt.Errorf("%w; last lines:\n%s", err, b.manager.Tail(20))
	}
	progress("manager ready")
	go b.sync.follow(ctx, b.c, map[string][]string{"a": b.flagSets("a"), "b": b.flagSets("b")})
	if err := b.confirmedAll(ctx, b.o.namespaces*b.o.pods, time.Now()); err != nil {
		return err
	}
	// The baseline of the fan-out: tenant A's edit to its consumers
	// without a policy, and what its confirmation costs.
	reads0 := b.sync.reads()
	cpu0, err := managerCPU(b.manager.Pid())
	if err != nil {
		return err
	}
	began := time.Now()
	if err := b.editAll(ctx, 1); err != nil {
		return err
	}
	b.unstaged = time.Since(began)
	progress("tenant A's edit served by every consumer, without a policy, in %s", b.unstaged.Round(time.Millisecond))
	if err := b.confirmedAll(ctx, b.o.namespaces*b.o.pods, began); err != nil {
		return err
	}
	cpu1, err := managerCPU(b.manager.Pid())
	if err != nil {
		return err
	}
	b.confirmed.reads, b.confirmed.cpu = b.sync.reads()-reads0, cpu1-cpu0
	progress("confirmed by every pod in %s: %d reads, %s of manager CPU", b.confirmed.took.Round(time.Millisecond), b.confirmed.reads,
		b.confirmed.cpu.Round(time.Millisecond))
	reads1 := b.sync.reads()
	cpu0, _ = managerCPU(b.manager.Pid())
	time.Sleep(b.o.quiet)
	cpu1, _ = managerCPU(b.manager.Pid())
	b.confirmed.quietReads, b.confirmed.quietCPU = b.sync.reads()-reads1, cpu1-cpu0
	progress("quiet for %s: %d reads, %s of manager CPU", b.o.quiet, b.confirmed.quietReads, b.confirmed.quietCPU.Round(time.Millisecond))
	stepAll := deliveryv1alpha1.RolloutStep{Name: "all", Percentage: ptr.To[int32](100), Approval: true}
	for _, name := range b.flagSets("a") {
		if err := b.c.Create(ctx, policy("a", name, []deliveryv1alpha1.RolloutStep{stepAll, {Name: "done", Percentage: ptr.To[int32](100)}})); err != nil {
			return err
		}
	}
	canary := deliveryv1alpha1.RolloutStep{Name: "canary", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"stage": "canary"}}, Approval: true}
	if err := b.c.Create(ctx, policy("b", "checkout", []deliveryv1alpha1.RolloutStep{canary, {Name: "rest", Percentage: ptr.To[int32](100)}})); err != nil {
		return err
	}
	for _, t := range []string{"a", "b"} {
		for _, name := range b.flagSets(t) {
			if err := b.waitPhase(ctx, t, name, deliveryv1alpha1.PhaseCompleted, "", 5*time.Minute); err != nil {
				return err
			}
		}
	}
	return nil
}

// measure takes tenant B's halts while A is idle, starts A's rollout over
// its pods that never answer, counts A's cost over the window, and takes
// B's halts again.
func (b *bench) measure(ctx context.Context, out io.Writer) (bool, error) {
	progress("tenant B's halts while tenant A is idle (the baseline)")
	idle, err := b.halts(ctx, b.o.trials)
	if err != nil {
		return false, err
	}
	progress("tenant A's rollout: an edit reaches its %d namespaces, whose %d pods never answer", b.o.namespaces, b.o.namespaces*b.o.pods)
	began := time.Now()
	if err := b.editAll(ctx, 2); err != nil {
		return false, err
	}
	served := time.Since(began)
	var stuck error
	for _, name := range b.flagSets("a") {
		if err := b.waitPhase(ctx, "a", name, deliveryv1alpha1.PhasePaused, "", b.o.pausedTimeout); err != nil {
			// A manager that cannot bring the hostile rollout to its
			// approval (one whose status writes are lost) is measured
			// all the same: its load is there.
			stuck = err
			progress("%v", err)
			break
		}
	}
	if stuck == nil {
		progress("tenant A's step served by every consumer in %s", served.Round(time.Millisecond))
	}
	window, err := b.window(ctx)
	if err != nil {
		return false, err
	}
	window.served, window.unstaged, window.stuck = served, b.unstaged, stuck
	progress("tenant A over %s: %.0f reconciles, %.3fs in all; %d reads reached the black hole", window.length, window.reconciles,
		window.reconcileSeconds, window.blackHoleReads)
	progress("tenant B's halts while tenant A black-holes")
	loaded, err := b.halts(ctx, b.o.trials)
	if err != nil {
		return false, err
	}
	return report(out, b.o, window, b.confirmed, idle, loaded), nil
}

// ---------------------------------------------------------------- objects

// tenant creates a FeatureFlag flags-<t>/checkout, its consumers' namespaces
// <t>-NNNN (the first labelled stage=canary), each with a grant, a source, a
// Deployment, its ReplicaSet and pods whose flagd management port is port
// on 127.0.0.1.
func (b *bench) tenant(ctx context.Context, t string, namespaces, pods int, port int) error {
	flags := "flags-" + t
	objs0 := []client.Object{namespace(flags, nil)}
	for _, name := range b.flagSets(t) {
		objs0 = append(objs0, flagSet(flags, name, 0))
	}
	if err := b.createAll(ctx, "namespaces and flag sets of tenant "+t, objs0); err != nil {
		return err
	}
	var objs, workloads []client.Object
	for i := range namespaces {
		ns := fmt.Sprintf("%s-%04d", t, i)
		var labels map[string]string
		if i == 0 {
			labels = map[string]string{"stage": "canary"}
		}
		objs = append(objs, namespace(ns, labels))
		// The ServiceAccount admission of pods wants the namespace's default
		// ServiceAccount, which no controller makes here.
		workloads = append(workloads, grant(flags, ns), source(ns, flags, b.flagSets(t)), deployment(ns),
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}})
	}
	if err := b.createAll(ctx, "consumer namespaces of tenant "+t, objs); err != nil {
		return err
	}
	if err := b.createAll(ctx, "grants, sources and Deployments of tenant "+t, workloads); err != nil {
		return err
	}
	// ReplicaSets owned by the Deployments, pods owned by the ReplicaSets.
	var sets []client.Object
	for i := range namespaces {
		ns := fmt.Sprintf("%s-%04d", t, i)
		d := &appsv1.Deployment{}
		if err := b.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d); err != nil {
			return err
		}
		sets = append(sets, replicaSet(d))
	}
	if err := b.createAll(ctx, "ReplicaSets of tenant "+t, sets); err != nil {
		return err
	}
	var podObjs []client.Object
	for _, s := range sets {
		for j := range pods {
			podObjs = append(podObjs, pod(s.(*appsv1.ReplicaSet), j, port))
		}
	}
	if err := b.createAll(ctx, "pods of tenant "+t, podObjs); err != nil {
		return err
	}
	return b.each(ctx, "pods of tenant "+t+" made Ready at 127.0.0.1", podObjs, func(ctx context.Context, o client.Object) error {
		p := o.(*corev1.Pod)
		now := metav1.Now()
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
		return b.c.Status().Update(ctx, p)
	})
}

func (b *bench) createAll(ctx context.Context, what string, objs []client.Object) error {
	return b.each(ctx, what, objs, func(ctx context.Context, o client.Object) error { return b.c.Create(ctx, o) })
}

func (b *bench) each(ctx context.Context, what string, objs []client.Object, fn func(context.Context, client.Object) error) error {
	start := time.Now()
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(b.o.parallel)
	for _, obj := range objs {
		g.Go(func() error {
			if err := fn(ctx, obj); err != nil {
				return fmt.Errorf("%s: %T %s/%s: %w", what, obj, obj.GetNamespace(), obj.GetName(), err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	progress("%s: %d in %s", what, len(objs), time.Since(start).Round(time.Millisecond))
	return nil
}

// flagSets are tenant t's FeatureFlags, in flags-<t>.
func (b *bench) flagSets(t string) []string {
	n := 1
	if t == "a" {
		n = max(b.o.hostile, 1)
	}
	out := []string{"checkout"}
	for i := 2; i <= n; i++ {
		out = append(out, fmt.Sprintf("checkout-%d", i))
	}
	return out
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func flagSet(ns, name string, n int) *v1beta1.FeatureFlag {
	return &v1beta1.FeatureFlag{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1beta1.FeatureFlagSpec{FlagSpec: v1beta1.FlagSpec{Flags: map[string]v1beta1.Flag{
			"edits": {State: v1beta1.FlagStateEnabled, DefaultVariant: "n", Variants: []byte(`{"n":` + strconv.Itoa(n) + `}`)},
		}}},
	}
}

// grant lets the FeatureFlagSources of namespace from read the
// FeatureFlags of flags.
func grant(flags, from string) client.Object {
	return fixtures.ReferenceGrant(flags, "from-"+from, from, "")
}

func source(ns, flags string, names []string) *v1beta1.FeatureFlagSource {
	var entries []v1beta1.Source
	for _, name := range names {
		entries = append(entries, v1beta1.Source{Source: flags + "/" + name, Provider: v1beta1.SyncProviderFile})
	}
	return &v1beta1.FeatureFlagSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "src"},
		Spec: v1beta1.FeatureFlagSourceSpec{
			Sources:    entries,
			TargetRefs: []v1beta1.TargetRef{{Group: "apps", Kind: "Deployment", Name: "web"}},
		},
	}
}

func deployment(ns string) *appsv1.Deployment {
	sel := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: sel},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
		}},
	}
}

func replicaSet(d *appsv1.Deployment) *appsv1.ReplicaSet {
	labels := map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: "bench"}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: "web-bench", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
		}},
	}
}

// pod is pod j of a ReplicaSet, with the flagd sidecar as admission
// injects it (a native sidecar with its management port), on port.
func pod(rs *appsv1.ReplicaSet, j, port int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: fmt.Sprintf("web-bench-%d", j), Labels: rs.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: injection.SidecarName, Image: "flagd:bench", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				Ports: []corev1.ContainerPort{{Name: staging.ManagementPortName, ContainerPort: int32(port)}}}},
			Containers: []corev1.Container{{Name: "app", Image: "app:1"}},
		},
	}
}

func policy(t, name string, steps []deliveryv1alpha1.RolloutStep) *deliveryv1alpha1.FeatureFlagRolloutPolicy {
	return &deliveryv1alpha1.FeatureFlagRolloutPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "flags-" + t, Name: name},
		Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
			TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind, Name: name},
			Steps:     steps,
			Gates:     []deliveryv1alpha1.Gate{{Type: deliveryv1alpha1.GateEvaluationErrors, Max: ptr.To[int64](0)}},
		},
	}
}

// ---------------------------------------------------------------- steps

// edit writes revision n of tenant t's flag set name.
func (b *bench) edit(ctx context.Context, t, name string, n int) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ff := &v1beta1.FeatureFlag{}
		if err := b.c.Get(ctx, client.ObjectKey{Namespace: "flags-" + t, Name: name}, ff); err != nil {
			return err
		}
		ff.Spec = flagSet("", name, n).Spec
		return b.c.Update(ctx, ff)
	})
}

func (b *bench) status(ctx context.Context, t, name string) (deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, error) {
	p := &deliveryv1alpha1.FeatureFlagRolloutPolicy{}
	err := b.c.Get(ctx, client.ObjectKey{Namespace: "flags-" + t, Name: name}, p)
	return p.Status, err
}

// waitPhase waits until tenant t's rollout of a target other than
// notTarget ("": any) is in phase.
func (b *bench) waitPhase(ctx context.Context, t, name string, phase deliveryv1alpha1.RolloutPhase, notTarget string, timeout time.Duration) error {
	_, err := b.phaseAt(ctx, t, name, phase, notTarget, timeout)
	return err
}

// phaseAt waits as waitPhase does, and says when it first saw the phase.
// The rollout is told by its target, not its number, so that a manager of
// a version before rollout numbers is measured the same way.
func (b *bench) phaseAt(ctx context.Context, t, name string, phase deliveryv1alpha1.RolloutPhase, notTarget string, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	var last deliveryv1alpha1.FeatureFlagRolloutPolicyStatus
	for time.Now().Before(deadline) {
		st, err := b.status(ctx, t, name)
		if err != nil {
			return time.Time{}, err
		}
		if st.Phase == phase && (notTarget == "" || st.TargetRevision != notTarget) {
			return time.Now(), nil
		}
		last = st
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return time.Time{}, fmt.Errorf("tenant %s's rollout did not reach %s within %s: %s %q; last lines:\n%s", t, phase, timeout, last.Phase, last.Message, b.manager.Tail(20))
}

// editAll writes revision n of every flag set of tenant A, and waits until
// each says its consumers hold what is planned for them.
func (b *bench) editAll(ctx context.Context, n int) error {
	for _, name := range b.flagSets("a") {
		if err := b.edit(ctx, "a", name, n); err != nil {
			return err
		}
	}
	for _, name := range b.flagSets("a") {
		if err := b.servedAll(ctx, "a", name, b.o.namespaces); err != nil {
			return err
		}
	}
	return nil
}

// confirmResult is what confirming tenant A's unstaged edit by its pods
// cost: the time from the edit to every pod confirmed, the reads of the
// pods' flagd, the manager's CPU; and the reads and CPU of a quiet spell
// after.
type confirmResult struct {
	took, cpu, quietCPU time.Duration
	reads, quietReads   int64
}

// confirmedAll waits until tenant A's FeatureFlags say that every one of
// their pods serves their revision, as its flagd answers (status
// confirmed "pods/pods"), and notes the time from began.
func (b *bench) confirmedAll(ctx context.Context, pods int, began time.Time) error {
	want := fmt.Sprintf("%d/%d", pods, pods)
	deadline := time.Now().Add(10 * time.Minute)
	for _, name := range b.flagSets("a") {
		ff := &v1beta1.FeatureFlag{}
		for {
			if err := b.c.Get(ctx, client.ObjectKey{Namespace: "flags-a", Name: name}, ff); err != nil {
				return err
			}
			if ff.Status.ObservedGeneration == ff.Generation && ff.Status.Confirmed == want {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("tenant a's FeatureFlag %s says %q confirmed, not %s", name, ff.Status.Confirmed, want)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	b.confirmed.took = time.Since(began)
	return nil
}

// servedAll waits until tenant t's FeatureFlag says that its n consumers
// hold the revision planned for them, after its last edit.
func (b *bench) servedAll(ctx context.Context, t, name string, n int) error {
	want := fmt.Sprintf("%d/%d", n, n)
	deadline := time.Now().Add(10 * time.Minute)
	ff := &v1beta1.FeatureFlag{}
	for time.Now().Before(deadline) {
		if err := b.c.Get(ctx, client.ObjectKey{Namespace: "flags-" + t, Name: name}, ff); err != nil {
			return err
		}
		if ff.Status.ObservedGeneration == ff.Generation && ff.Status.Delivered == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("tenant %s's FeatureFlag says %q delivered, not %s", t, ff.Status.Delivered, want)
}

// halts measures tenant B's halts: each an edit that reaches its canary,
// then errors at the canary's flagd, until the policy says Halted. A halt
// not seen within o.haltTimeout is -1.
func (b *bench) halts(ctx context.Context, trials int) ([]time.Duration, error) {
	var out []time.Duration
	for range trials {
		st, err := b.status(ctx, "b", "checkout")
		if err != nil {
			return nil, err
		}
		b.fake.errors.Store(0)
		b.edits++
		if err := b.edit(ctx, "b", "checkout", 100+b.edits); err != nil {
			return nil, err
		}
		if err := b.waitPhase(ctx, "b", "checkout", deliveryv1alpha1.PhasePaused, st.TargetRevision, b.o.haltTimeout); err != nil {
			return nil, err
		}
		// Let the gate take its baseline.
		reads := b.fake.reads.Load()
		for b.fake.reads.Load() < reads+2 {
			time.Sleep(50 * time.Millisecond)
		}
		b.fake.errors.Store(3)
		erred := time.Now()
		at, err := b.phaseAt(ctx, "b", "checkout", deliveryv1alpha1.PhaseHalted, st.TargetRevision, b.o.haltTimeout)
		if err != nil {
			progress("  tenant B not halted within %s: %v", b.o.haltTimeout, err)
			out = append(out, -1)
			continue
		}
		out = append(out, at.Sub(erred))
		progress("  tenant B halted %s after its flagd's errors", at.Sub(erred).Round(time.Millisecond))
	}
	return out, nil
}

// windowResult is what tenant A's rollout cost over the window.
type windowResult struct {
	// served is how long tenant A's edit took to reach every consumer of
	// its step; unstaged, the same edit without a policy.
	served, unstaged time.Duration
	length           time.Duration
	reconciles       float64
	reconcileSeconds float64
	reconcileP99     float64
	largestBucket    float64
	blackHoleReads   int64
	managerCPU       time.Duration
	// stuck says why tenant A's rollouts did not reach their approval
	// (nil when they did).
	stuck error
}

// window counts, over o.window, tenant A's reconciles (the rollout
// queue's, which tenant B's idle policy hardly adds to) and the reads that
// reached the black hole.
func (b *bench) window(ctx context.Context) (windowResult, error) {
	before, err := b.manager.Metrics()
	if err != nil {
		return windowResult{}, err
	}
	holes := b.blackHole.accepted.Load()
	cpu0, err := managerCPU(b.manager.Pid())
	if err != nil {
		return windowResult{}, err
	}
	select {
	case <-ctx.Done():
		return windowResult{}, ctx.Err()
	case <-time.After(b.o.window):
	}
	after, err := b.manager.Metrics()
	if err != nil {
		return windowResult{}, err
	}
	cpu1, err := managerCPU(b.manager.Pid())
	if err != nil {
		return windowResult{}, err
	}
	rollouts := map[string]string{"controller": "rollouts"}
	n0, s0 := histogramTotals(before, "controller_runtime_reconcile_time_seconds", rollouts)
	n1, s1 := histogramTotals(after, "controller_runtime_reconcile_time_seconds", rollouts)
	w := windowResult{length: b.o.window, reconciles: n1 - n0, reconcileSeconds: s1 - s0,
		blackHoleReads: b.blackHole.accepted.Load() - holes, managerCPU: cpu1 - cpu0,
	}
	w.reconcileP99 = histogramQuantile(before, after, "controller_runtime_reconcile_time_seconds", rollouts, 0.99)
	w.largestBucket = largestBound(after, "controller_runtime_reconcile_time_seconds")
	return w, nil
}

// ---------------------------------------------------------------- peers

// blackHole accepts connections and never answers; it counts them.
type blackHole struct {
	l        net.Listener
	port     int
	accepted atomic.Int64
	conns    chan net.Conn
}

func newBlackHole() (*blackHole, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &blackHole{l: l, port: l.Addr().(*net.TCPAddr).Port, conns: make(chan net.Conn, 1<<16)}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			h.accepted.Add(1)
			select {
			case h.conns <- c: // held until the reader gives up
			default:
				_ = c.Close()
			}
			// Drop what the manager has given up on.
			for len(h.conns) > 4096 {
				_ = (<-h.conns).Close()
			}
		}
	}()
	return h, nil
}

func (h *blackHole) close() {
	_ = h.l.Close()
	for len(h.conns) > 0 {
		_ = (<-h.conns).Close()
	}
}

// fakeFlagd answers flagd's /metrics with the error count the bench sets.
type fakeFlagd struct {
	srv    *http.Server
	port   int
	errors atomic.Int64
	reads  atomic.Int64
}

func newFakeFlagd() (*fakeFlagd, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &fakeFlagd{port: l.Addr().(*net.TCPAddr).Port}
	f.srv = &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		f.reads.Add(1)
		fmt.Fprintf(w, "%s{feature_flag_reason=\"ERROR\"} %d\n", staging.FlagdErrorMetric, f.errors.Load())
	})}
	go func() { _ = f.srv.Serve(l) }()
	return f, nil
}

func (f *fakeFlagd) close() { _ = f.srv.Close() }

// ---------------------------------------------------------------- report

func report(out io.Writer, o options, w windowResult, c confirmResult, idle, loaded []time.Duration) bool {
	fmt.Fprintf(out, "\n### Gates at scale: tenant A, %d rollout polic(ies) over %d consumer namespaces and %d pods that never answer\n\n",
		max(o.hostile, 1), o.namespaces, o.namespaces*o.pods)
	fmt.Fprintf(out, "| over %s | value |\n|---|---|\n", w.length)
	perMin := func(n float64) string {
		return strconv.FormatFloat(n*float64(time.Minute)/float64(w.length), 'f', 0, 64)
	}
	mean := 0.0
	if w.reconciles > 0 {
		mean = w.reconcileSeconds / w.reconciles
	}
	fmt.Fprintf(out, "| tenant A's edit to its step's every consumer holding it (without a policy: %s) | %s |\n",
		w.unstaged.Round(time.Millisecond), w.served.Round(time.Millisecond))
	if w.stuck != nil {
		fmt.Fprintf(out, "| tenant A's rollout waiting for its approval | not within %s: measured as it stood |\n", o.pausedTimeout)
	}
	fmt.Fprintf(out, "| rollout reconciles per minute | %s |\n", perMin(w.reconciles))
	fmt.Fprintf(out, "| reconcile time, mean | %s |\n", (time.Duration(mean * float64(time.Second))).Round(time.Microsecond))
	fmt.Fprintf(out, "| reconcile time, p99 (histogram bucket) | %s |\n", bucketString(w.reconcileP99, w.largestBucket))
	fmt.Fprintf(out, "| reads that reached the black hole, per minute | %s |\n", perMin(float64(w.blackHoleReads)))
	fmt.Fprintf(out, "| manager CPU per minute | %s |\n", (time.Duration(float64(w.managerCPU) * float64(time.Minute) / float64(w.length))).Round(time.Millisecond))

	fmt.Fprintf(out, "\n### Confirmation at scale: one edit of a flag set read by %d pods in %d namespaces\n\n", o.namespaces*o.pods, o.namespaces)
	fmt.Fprintf(out, "| | value |\n|---|---|\n")
	fmt.Fprintf(out, "| edit to every consumer's copy holding it (written) | %s |\n", w.unstaged.Round(time.Millisecond))
	fmt.Fprintf(out, "| edit to every pod confirmed (status) | %s |\n", c.took.Round(time.Millisecond))
	fmt.Fprintf(out, "| reads of the pods' flagd | %d (%.2f per pod) |\n", c.reads, float64(c.reads)/float64(max(o.namespaces*o.pods, 1)))
	fmt.Fprintf(out, "| manager CPU, edit to every pod confirmed | %s |\n", c.cpu.Round(time.Millisecond))
	fmt.Fprintf(out, "| then quiet for %s: reads, manager CPU | %d, %s |\n", o.quiet, c.quietReads, c.quietCPU.Round(time.Millisecond))

	fmt.Fprintf(out, "\n### Tenant B's failing gate to Halted\n\n| tenant A | halts | each | median |\n|---|---|---|---|\n")
	row := func(name string, d []time.Duration) time.Duration {
		var each []string
		for _, x := range d {
			if x < 0 {
				each = append(each, "not within "+o.haltTimeout.String())
				continue
			}
			each = append(each, x.Round(time.Millisecond).String())
		}
		seen := make([]time.Duration, 0, len(d))
		for _, x := range d {
			if x < 0 {
				x = o.haltTimeout // not seen: at least this
			}
			seen = append(seen, x)
		}
		m := median(seen)
		fmt.Fprintf(out, "| %s | %d | %s | %s |\n", name, len(d), strings.Join(each, ", "), m.Round(time.Millisecond))
		return m
	}
	base := row("idle (baseline)", idle)
	load := row(fmt.Sprintf("black-holing %d pods", o.namespaces*o.pods), loaded)
	worst := slices.Max(loaded)
	if slices.Contains(loaded, -1) {
		worst = o.haltTimeout
	}
	ok := worst <= goalHalt
	ratio := "n/a"
	if base > 0 {
		ratio = strconv.FormatFloat(float64(load)/float64(base), 'f', 2, 64) + "×"
	}
	verdict := "met"
	if !ok {
		verdict = "missed"
	}
	fmt.Fprintf(out, "\nMedian under load against the baseline: %s. Goal, every halt within %s: %s (slowest %s).\n", ratio, goalHalt, verdict, worst.Round(time.Millisecond))
	fmt.Fprintf(out, "Load average when done: %s\n", loadAverage())
	return ok
}

// histogramTotals is a histogram's count and sum of observations.
func histogramTotals(fams map[string]*dto.MetricFamily, name string, match map[string]string) (count, sum float64) {
	f, ok := fams[name]
	if !ok {
		return 0, 0
	}
	for _, m := range f.GetMetric() {
		if labelsMatch(m, match) {
			count += float64(m.GetHistogram().GetSampleCount())
			sum += m.GetHistogram().GetSampleSum()
		}
	}
	return count, sum
}

// histogramQuantile estimates quantile q of a histogram's observations
// between two scrapes: the upper bound of the bucket it falls in.
func histogramQuantile(before, after map[string]*dto.MetricFamily, name string, match map[string]string, q float64) float64 {
	buckets := func(fams map[string]*dto.MetricFamily) map[float64]float64 {
		out := map[float64]float64{}
		f, ok := fams[name]
		if !ok {
			return out
		}
		for _, m := range f.GetMetric() {
			if !labelsMatch(m, match) {
				continue
			}
			for _, b := range m.GetHistogram().GetBucket() {
				out[b.GetUpperBound()] += float64(b.GetCumulativeCount())
			}
		}
		return out
	}
	a, b := buckets(after), buckets(before)
	bounds := make([]float64, 0, len(a))
	for ub := range a {
		bounds = append(bounds, ub)
	}
	slices.Sort(bounds)
	if len(bounds) == 0 {
		return 0
	}
	total := a[bounds[len(bounds)-1]] - b[bounds[len(bounds)-1]]
	for _, ub := range bounds {
		if a[ub]-b[ub] >= q*total {
			return ub
		}
	}
	return bounds[len(bounds)-1]
}

// bucketString shows a quantile's bucket; the bucket above the largest
// bound is shown as more than that bound.
func bucketString(ub float64, largest float64) string {
	if math.IsInf(ub, 1) {
		return "more than " + time.Duration(largest*float64(time.Second)).String()
	}
	return time.Duration(ub * float64(time.Second)).Round(time.Microsecond).String()
}

// largestBound is the largest finite bucket bound of histogram name.
func largestBound(fams map[string]*dto.MetricFamily, name string) float64 {
	largest := 0.0
	if f, ok := fams[name]; ok {
		for _, m := range f.GetMetric() {
			for _, b := range m.GetHistogram().GetBucket() {
				if ub := b.GetUpperBound(); !math.IsInf(ub, 1) && ub > largest {
					largest = ub
				}
			}
		}
	}
	return largest
}

func labelsMatch(m *dto.Metric, match map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := match[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(match)
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// managerCPU is a process's user and system CPU time.
func managerCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0, errors.New("short /proc stat")
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	const ticks = 100 // USER_HZ
	return time.Duration(utime+stime) * time.Second / ticks, nil
}
