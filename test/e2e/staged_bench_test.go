package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"buf.build/gen/go/open-feature/flagd/grpc/go/flagd/evaluation/v1/evaluationv1grpc"
	evaluationv1 "buf.build/gen/go/open-feature/flagd/protocolbuffers/go/flagd/evaluation/v1"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// The staged-rollout benchmark: what a FeatureFlagRolloutPolicy costs, on
// the suite's set-up (control plane, node, whole operator), two figures
// of one run.
//
// Promote to served. A flag set of its own namespace per size, read
// through a ReferenceGrant by a canary namespace and by size wave
// namespaces (a source and a Deployment each; one wave Deployment has a
// pod on the node, the others none, so that the node runs one flagd per
// size). Its policy: the canary namespace with approval, then the wave
// namespaces. Each rollout edits the flag set, waits until the canary
// serves it and the policy waits for approval, then writes the promote
// annotation and times, from that write: the first and the last of the
// wave's generated ConfigMaps holding the revision (a watch of them), the
// wave pod's flagd answering it (its event stream, then an evaluation),
// and the policy's status saying Completed. One rollout warms up.
//
// Against it, in the same run and on the same consumers: edits of the
// flag set before its policy exists, from the write to every consumer's
// ConfigMap holding it.
//
// Edits of a flag set no policy targets. Edit to its generated ConfigMap
// (a watch), as BenchmarkEditToServed's configmap stage, measured five
// times in the run: twice with no rollout policy in the cluster, then
// with the policies above each mid-rollout (its canary on a new revision,
// the waves on the stable one), then with each completed (after the
// rollouts), then once more with the policies deleted. The three
// baselines bracket the two others; how far apart they are is the noise.
//
//	go test ./test/e2e -run '^$' -bench StagedRollout -benchtime 1x
//	FLAGPLANE_E2E_BENCH_ROLLOUTS=20 FLAGPLANE_E2E_BENCH_PLAIN_EDITS=200 go test ./test/e2e -run '^$' -bench StagedRollout -benchtime 1x
func BenchmarkStagedRollout(b *testing.B) {
	ctx := context.Background()
	w := startBenchWorld(ctx, b)
	cs, err := kubernetes.NewForConfig(w.cp.Config)
	if err != nil {
		b.Fatal(err)
	}
	sb := &stagedBench{w: w, cs: cs, rollouts: envInt(stagedRolloutsEnv, 10), edits: envInt(plainEditsEnv, 100)}
	for range b.N {
		if err := sb.run(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for _, r := range sb.sizes {
		for _, s := range r.stageNames() {
			unit := strings.NewReplacer(" ", "-", ":", "").Replace(strings.ToLower(s))
			b.ReportMetric(ms(percentile(r.stages[s], 0.5)), fmt.Sprintf("promote-%d-%s-p50-ms", r.size, unit))
			b.ReportMetric(ms(percentile(r.stages[s], 0.99)), fmt.Sprintf("promote-%d-%s-p99-ms", r.size, unit))
		}
	}
	b.ReportMetric(sb.worstPolicyRatio(0.5), "edit-p50-with-policies/baselines")
	b.ReportMetric(sb.worstPolicyRatio(0.99), "edit-p99-with-policies/baselines")
	b.ReportMetric(sb.noise(0.5), "edit-p50-baselines-spread")
	b.ReportMetric(sb.noise(0.99), "edit-p99-baselines-spread")
	fmt.Println()
	fmt.Print(sb.table())
}

const (
	stagedRolloutsEnv = "FLAGPLANE_E2E_BENCH_ROLLOUTS"    // timed rollouts per size
	plainEditsEnv     = "FLAGPLANE_E2E_BENCH_PLAIN_EDITS" // timed edits per measurement of the plain flag set
	stageFirstCM      = "first ConfigMap"
	stageAllCMs       = "every ConfigMap"
	stageFlagd        = "flagd"
	stageCompleted    = "Completed"
	// The reference: an edit with no policy, to every consumer.
	stageUnstagedFirst = "no policy: first ConfigMap"
	stageUnstagedAll   = "no policy: every ConfigMap"
)

// stagedSizes are the consumers in the promoted step.
var stagedSizes = []int{10, 100}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

type stagedBench struct {
	w               *world
	cs              *kubernetes.Clientset
	rollouts, edits int
	sizes           []*stagedSize
	plain           *plainFlagSet
	measurements    []editMeasurement
}

// run sets up everything, then measures the plain flag set's edits with
// no policy in the cluster (twice), creates the policies, measures them
// again with every policy mid-rollout, times the rollouts, measures the
// edits with every policy completed, deletes the policies and measures a
// third baseline: the baselines bracket the measurements with policies.
func (sb *stagedBench) run(ctx context.Context) error {
	var err error
	if sb.plain, err = newPlainFlagSet(ctx, sb.w, sb.cs); err != nil {
		return err
	}
	defer sb.plain.close()
	for _, n := range stagedSizes {
		s, err := newStagedSize(ctx, sb.w, sb.cs, n)
		if err != nil {
			return err
		}
		defer s.close()
		sb.sizes = append(sb.sizes, s)
	}
	for _, s := range sb.sizes {
		if err := s.unstaged(ctx, sb.rollouts); err != nil {
			return err
		}
	}
	consumers := 0
	for _, s := range sb.sizes {
		consumers += s.size + 1
	}
	measure := func(name string, policies bool) error {
		d, err := sb.plain.measure(ctx, sb.edits)
		if err != nil {
			return fmt.Errorf("edits, %s: %w", name, err)
		}
		sb.measurements = append(sb.measurements, editMeasurement{name: name, policies: policies, d: d})
		return nil
	}
	if err := measure("no rollout policy (baseline 1)", false); err != nil {
		return err
	}
	if err := measure("no rollout policy (baseline 2)", false); err != nil {
		return err
	}
	for _, s := range sb.sizes {
		if err := s.createPolicy(ctx); err != nil {
			return err
		}
		if err := s.stage(ctx); err != nil {
			return err
		}
	}
	if err := measure(fmt.Sprintf("%d rollout policies, %d consumers, each mid-rollout", len(sb.sizes), consumers), true); err != nil {
		return err
	}
	for _, s := range sb.sizes {
		// The rollout staged above is the warm-up.
		if err := s.promote(ctx, false); err != nil {
			return err
		}
		for range sb.rollouts {
			if err := s.stage(ctx); err != nil {
				return err
			}
			if err := s.promote(ctx, true); err != nil {
				return err
			}
		}
	}
	if err := measure(fmt.Sprintf("%d rollout policies, %d consumers, each completed", len(sb.sizes), consumers), true); err != nil {
		return err
	}
	for _, s := range sb.sizes {
		if err := s.deletePolicy(ctx); err != nil {
			return err
		}
	}
	return measure("no rollout policy (baseline 3, the policies deleted)", false)
}

// editMeasurement is one measurement of the plain flag set's edits.
type editMeasurement struct {
	name     string
	policies bool
	d        []time.Duration
}

// plainFlagSet is a flag set with no rollout policy, read by a Deployment
// with no pod: its ConfigMap is what the edit path writes.
type plainFlagSet struct {
	w       *world
	ns      string
	variant string
	cms     watch.Interface
	seen    chan string // variants the ConfigMap watch delivers
}

func newPlainFlagSet(ctx context.Context, w *world, cs *kubernetes.Clientset) (*plainFlagSet, error) {
	ns, err := w.cp.NewNamespace(ctx, "bench-plain")
	if err != nil {
		return nil, err
	}
	p := &plainFlagSet{w: w, ns: ns, variant: "off", seen: make(chan string, 16)}
	dep := deployment(ns, benchApp, appImage, nil)
	dep.Spec.Replicas = ptr.To[int32](0)
	for _, o := range []client.Object{
		flagSet(ns, benchFlagSet, p.variant),
		fixtures.Source(ns, benchSource, []v1beta1.Source{fixtures.FileRef(benchFlagSet)}, fixtures.Targeting("Deployment", benchApp)),
		dep,
	} {
		if err := w.cp.Client.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	cm := topology.ConfigMapName(topology.FlagSetKey(ns, benchFlagSet))
	if err := waitConfigMaps(ctx, cs, cm, []string{ns}, p.variant); err != nil {
		return nil, err
	}
	p.cms, err = cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + cm})
	if err != nil {
		return nil, err
	}
	go func() {
		defer close(p.seen)
		for ev := range p.cms.ResultChan() {
			if c, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == watch.Modified {
				for _, v := range c.Data {
					p.seen <- variantIn(v)
				}
			}
		}
	}()
	return p, nil
}

// measure makes edits one at a time, each timed from just before its
// write until the ConfigMap watch delivers it; the next starts once the
// FeatureFlag's status observed it.
func (p *plainFlagSet) measure(ctx context.Context, edits int) ([]time.Duration, error) {
	var out []time.Duration
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: benchFlagSet}}
	for i := 0; i <= edits; i++ { // the first one warms up
		next := map[string]string{"on": "off", "off": "on"}[p.variant]
		patch := []byte(`{"spec":{"flagSpec":{"flags":{"` + flagKey + `":{"defaultVariant":"` + next + `"}}}}}`)
		start := time.Now()
		if err := p.w.cp.Client.Patch(ctx, ff, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return nil, fmt.Errorf("editing the FeatureFlag: %w", err)
		}
		if err := waitVariant(ctx, p.seen, next); err != nil {
			return nil, fmt.Errorf("edit %d: %w", i, err)
		}
		if i > 0 {
			out = append(out, time.Since(start))
		}
		p.variant = next
		if err := waitFlagSetObserved(ctx, p.w.cp.Client, ff); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func waitVariant(ctx context.Context, seen <-chan string, variant string) error {
	timeout := time.After(benchTimeout)
	for {
		select {
		case v, ok := <-seen:
			if !ok {
				return errors.New("the ConfigMap watch ended")
			}
			if v == variant {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("the ConfigMap never held %q", variant)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func waitFlagSetObserved(ctx context.Context, c client.Client, ff *v1beta1.FeatureFlag) error {
	return wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, benchTimeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ff), ff); err != nil {
			return false, err
		}
		return ff.Status.ObservedGeneration == ff.Generation, nil
	})
}

func (p *plainFlagSet) close() {
	if p.cms != nil {
		p.cms.Stop()
	}
	_ = p.w.cp.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.ns}})
}

// stagedSize is one size's flag set, its consumers and its policy.
type stagedSize struct {
	w       *world
	cs      *kubernetes.Clientset
	size    int
	flags   string   // the flag set's namespace
	canary  string   // the first step's namespace
	wave    []string // the promoted step's namespaces
	podNS   string   // the wave namespace whose pod runs flagd
	addr    string   // that flagd's evaluation port
	cm      string   // the generated ConfigMaps' name
	variant string   // what the flag set serves once completed
	stages  map[string][]time.Duration

	mu        sync.Mutex
	since     time.Time
	servedAt  time.Time // when the wave's flagd first answered want
	want      string
	cancelers []func()
}

func newStagedSize(ctx context.Context, w *world, cs *kubernetes.Clientset, n int) (*stagedSize, error) {
	c := w.cp.Client
	s := &stagedSize{w: w, cs: cs, size: n, variant: "off", stages: map[string][]time.Duration{}}
	var err error
	if s.flags, err = w.cp.NewNamespace(ctx, fmt.Sprintf("bench-staged%d", n)); err != nil {
		return nil, err
	}
	s.cm = topology.ConfigMapName(topology.FlagSetKey(s.flags, benchFlagSet))
	stageLabel := "bench.flagplane.dev/" + s.flags
	s.canary = s.flags + "-canary"
	for i := range n {
		s.wave = append(s.wave, fmt.Sprintf("%s-w%03d", s.flags, i))
	}
	s.podNS = s.wave[0]
	objs := []client.Object{flagSet(s.flags, benchFlagSet, s.variant)}
	for _, ns := range append([]string{s.canary}, s.wave...) {
		stage := "wave"
		if ns == s.canary {
			stage = "canary"
		}
		dep := deployment(ns, benchApp, appImage, nil)
		if ns != s.podNS {
			dep.Spec.Replicas = ptr.To[int32](0)
		}
		objs = append(objs,
			// A ReferenceGrant lists at most 16 namespaces: one each.
			fixtures.ReferenceGrant(s.flags, "from-"+ns, ns, benchFlagSet),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{stageLabel: stage}}},
			fixtures.Source(ns, benchSource, []v1beta1.Source{fixtures.FileRef(s.flags + "/" + benchFlagSet)}, fixtures.Targeting("Deployment", benchApp)),
			dep)
	}
	// Namespaces first, then the rest, a few at a time.
	for _, batch := range [][]client.Object{namespacesOf(objs), othersOf(objs)} {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(8)
		for _, o := range batch {
			g.Go(func() error {
				if err := c.Create(gctx, o); err != nil {
					return fmt.Errorf("creating %T %s/%s: %w", o, o.GetNamespace(), o.GetName(), err)
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return s, err
		}
	}
	if err := waitConfigMaps(ctx, cs, s.cm, append([]string{s.canary}, s.wave...), s.variant); err != nil {
		return s, err
	}
	if err := s.watchFlagd(ctx); err != nil {
		return s, err
	}
	return s, nil
}

func namespacesOf(objs []client.Object) []client.Object {
	var out []client.Object
	for _, o := range objs {
		if _, ok := o.(*corev1.Namespace); ok {
			out = append(out, o)
		}
	}
	return out
}

func othersOf(objs []client.Object) []client.Object {
	var out []client.Object
	for _, o := range objs {
		if _, ok := o.(*corev1.Namespace); !ok {
			out = append(out, o)
		}
	}
	return out
}

// waitConfigMaps waits until the ConfigMap named name exists in every
// namespace of nss with variant.
func waitConfigMaps(ctx context.Context, cs *kubernetes.Clientset, name string, nss []string, variant string) error {
	var missing []string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, benchSetupWait, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			return false, err
		}
		held := map[string]bool{}
		for _, c := range list.Items {
			for _, v := range c.Data {
				held[c.Namespace] = variantIn(v) == variant
			}
		}
		missing = missing[:0]
		for _, ns := range nss {
			if !held[ns] {
				missing = append(missing, ns)
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for ConfigMap %s with %q in %d namespaces (missing %d, e.g. %v): %w", name, variant, len(nss), len(missing), missing[:min(3, len(missing))], err)
	}
	return nil
}

// watchFlagd finds the wave pod's flagd and records when it first answers
// the variant the rollout being timed delivers: on each
// configuration_change of its event stream, an evaluation says which.
func (s *stagedSize) watchFlagd(ctx context.Context) error {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, benchSetupWait, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := s.w.cp.Client.List(ctx, &pods, client.InNamespace(s.podNS), client.MatchingLabels{"app": benchApp}); err != nil {
			return false, err
		}
		var live []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		if len(live) != 1 || !podReady(&live[0]) || live[0].Annotations[restarts.AnnotationInjection] == "" {
			return false, nil
		}
		addr, ok := s.w.node.Addr(types.NamespacedName{Namespace: s.podNS, Name: live[0].Name}, injection.SidecarName, 8013)
		if !ok {
			return false, nil
		}
		s.addr = addr
		e, err := resolveOnce(addr)
		return err == nil && e == evaluated(s.variant), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the flagd of %s to serve the flag: %w\ncontainer logs:\n%s", s.podNS, err, s.w.node.LogsOf(s.podNS))
	}
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	s.cancelers = append(s.cancelers, func() { cancel(); _ = conn.Close() })
	stream, err := evaluationv1grpc.NewServiceClient(conn).EventStream(sctx, &evaluationv1.EventStreamRequest{})
	if err != nil {
		return fmt.Errorf("subscribing to flagd's events: %w", err)
	}
	go func() {
		for {
			ev, err := stream.Recv()
			if err != nil {
				return
			}
			if ev.GetType() != "configuration_change" {
				continue
			}
			for range 100 {
				s.mu.Lock()
				want, since := s.want, s.since
				s.mu.Unlock()
				if e, err := resolveOnce(s.addr); err == nil && want != "" && e.Variant == want {
					s.mu.Lock()
					if s.servedAt.IsZero() && s.since.Equal(since) {
						s.servedAt = time.Now()
					}
					s.mu.Unlock()
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
	}()
	return nil
}

// createPolicy stages the flag set: the canary namespace with approval,
// then the wave; and waits until it recorded the stable revision.
func (s *stagedSize) createPolicy(ctx context.Context) error {
	stageLabel := "bench.flagplane.dev/" + s.flags
	p := &deliveryv1alpha1.FeatureFlagRolloutPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.flags, Name: benchFlagSet},
		Spec: deliveryv1alpha1.FeatureFlagRolloutPolicySpec{
			TargetRef: deliveryv1alpha1.FlagSetTargetReference{Group: v1beta1.GroupVersion.Group, Kind: v1beta1.FeatureFlagKind, Name: benchFlagSet},
			Steps: []deliveryv1alpha1.RolloutStep{
				{Name: "canary", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{stageLabel: "canary"}}, Approval: true},
				{Name: "wave", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{stageLabel: "wave"}}},
			},
		},
	}
	if err := s.w.cp.Client.Create(ctx, p); err != nil {
		return fmt.Errorf("creating the rollout policy of %s: %w", s.flags, err)
	}
	_, err := s.policyUntil(ctx, "the policy to record its stable revision", func(st deliveryv1alpha1.FeatureFlagRolloutPolicyStatus) bool {
		return st.Phase == deliveryv1alpha1.PhaseCompleted && st.StableRevision != ""
	})
	return err
}

// deletePolicy deletes the size's policy and waits until it is gone and
// every consumer serves the flag set as it is.
func (s *stagedSize) deletePolicy(ctx context.Context) error {
	p := &deliveryv1alpha1.FeatureFlagRolloutPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: s.flags, Name: benchFlagSet}}
	if err := s.w.cp.Client.Delete(ctx, p); err != nil {
		return fmt.Errorf("deleting the rollout policy of %s: %w", s.flags, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, benchTimeout, true, func(ctx context.Context) (bool, error) {
		err := s.w.cp.Client.Get(ctx, client.ObjectKeyFromObject(p), p)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		return fmt.Errorf("waiting for the rollout policy of %s to go: %w", s.flags, err)
	}
	return waitConfigMaps(ctx, s.cs, s.cm, append([]string{s.canary}, s.wave...), s.variant)
}

// stage edits the flag set and waits until its canary serves it and the
// policy waits for approval.
func (s *stagedSize) stage(ctx context.Context) error {
	before, err := s.policyUntil(ctx, "the policy", func(deliveryv1alpha1.FeatureFlagRolloutPolicyStatus) bool { return true })
	if err != nil {
		return err
	}
	next := map[string]string{"on": "off", "off": "on"}[s.variant]
	patch := []byte(`{"spec":{"flagSpec":{"flags":{"` + flagKey + `":{"defaultVariant":"` + next + `"}}}}}`)
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: s.flags, Name: benchFlagSet}}
	if err := s.w.cp.Client.Patch(ctx, ff, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("editing FeatureFlag %s/%s: %w", s.flags, benchFlagSet, err)
	}
	s.variant = next
	_, err = s.policyUntil(ctx, "the canary to serve the edit and the policy to wait for approval", func(st deliveryv1alpha1.FeatureFlagRolloutPolicyStatus) bool {
		return st.Phase == deliveryv1alpha1.PhasePaused && st.Step == 0 && st.TargetRevision != before.Status.TargetRevision &&
			strings.Contains(st.Message, "waiting for approval")
	})
	if err != nil {
		return err
	}
	return waitConfigMaps(ctx, s.cs, s.cm, []string{s.canary}, next)
}

// promote writes the promote annotation and, when timed, records from
// that write the first and the last wave ConfigMap holding the revision,
// the wave pod's flagd answering it and the policy saying Completed.
func (s *stagedSize) promote(ctx context.Context, timed bool) error {
	p, err := s.policyUntil(ctx, "the policy", func(deliveryv1alpha1.FeatureFlagRolloutPolicyStatus) bool { return true })
	if err != nil {
		return err
	}
	wi, err := s.watchConfigMaps(ctx)
	if err != nil {
		return err
	}
	defer wi.Stop()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		deliveryv1alpha1.PromoteAnnotation: deliveryv1alpha1.PromoteValue(p.Status, 0)}}})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.want, s.servedAt = s.variant, time.Time{}
	s.since = time.Now()
	start := s.since
	s.mu.Unlock()
	if err := s.w.cp.Client.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("promoting: %w", err)
	}
	first, all, err := heldBy(wi, s.wave, s.variant, start)
	if err != nil {
		return fmt.Errorf("after promoting: %w", err)
	}
	if _, err := s.policyUntil(ctx, "the promoted rollout to complete", func(st deliveryv1alpha1.FeatureFlagRolloutPolicyStatus) bool {
		return st.Phase == deliveryv1alpha1.PhaseCompleted && st.StableRevision == p.Status.TargetRevision
	}); err != nil {
		return err
	}
	completed := time.Since(start)
	var served time.Time
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, benchTimeout, true, func(context.Context) (bool, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		served = s.servedAt
		return !served.IsZero(), nil
	}); err != nil {
		return fmt.Errorf("the flagd of %s never answered %q after the promotion: %w", s.podNS, s.variant, err)
	}
	s.mu.Lock()
	s.want = ""
	s.mu.Unlock()
	if timed {
		s.stages[stageFirstCM] = append(s.stages[stageFirstCM], first)
		s.stages[stageAllCMs] = append(s.stages[stageAllCMs], all)
		s.stages[stageFlagd] = append(s.stages[stageFlagd], served.Sub(start))
		s.stages[stageCompleted] = append(s.stages[stageCompleted], completed)
	}
	return nil
}

// watchConfigMaps watches the size's generated ConfigMaps, in every
// namespace, from now.
func (s *stagedSize) watchConfigMaps(ctx context.Context) (watch.Interface, error) {
	list, err := s.cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + s.cm})
	if err != nil {
		return nil, err
	}
	return s.cs.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + s.cm, ResourceVersion: list.ResourceVersion})
}

// heldBy reads a ConfigMap watch until the ConfigMaps of every namespace
// of nss hold variant, and says how long after start the first and the
// last did.
func heldBy(wi watch.Interface, nss []string, variant string, start time.Time) (first, all time.Duration, err error) {
	want := map[string]bool{}
	for _, ns := range nss {
		want[ns] = true
	}
	held := map[string]bool{}
	timeout := time.After(benchTimeout)
	for len(held) < len(want) {
		select {
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return 0, 0, errors.New("the ConfigMap watch ended")
			}
			c, ok := ev.Object.(*corev1.ConfigMap)
			if !ok || !want[c.Namespace] || held[c.Namespace] {
				continue
			}
			for _, v := range c.Data {
				if variantIn(v) == variant {
					held[c.Namespace] = true
					if first == 0 {
						first = time.Since(start)
					}
				}
			}
		case <-timeout:
			return 0, 0, fmt.Errorf("%d of %d ConfigMaps hold %q", len(held), len(want), variant)
		}
	}
	return first, time.Since(start), nil
}

// unstaged times edits of the flag set before its policy exists, from
// the write until every consumer's ConfigMap holds it: the same fan-out
// as a promotion of the whole wave, without staging. The first edit
// warms up.
func (s *stagedSize) unstaged(ctx context.Context, edits int) error {
	wi, err := s.watchConfigMaps(ctx)
	if err != nil {
		return err
	}
	defer wi.Stop()
	nss := append([]string{s.canary}, s.wave...)
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: s.flags, Name: benchFlagSet}}
	for i := 0; i <= edits; i++ {
		next := map[string]string{"on": "off", "off": "on"}[s.variant]
		patch := []byte(`{"spec":{"flagSpec":{"flags":{"` + flagKey + `":{"defaultVariant":"` + next + `"}}}}}`)
		start := time.Now()
		if err := s.w.cp.Client.Patch(ctx, ff, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("editing FeatureFlag %s/%s: %w", s.flags, benchFlagSet, err)
		}
		s.variant = next
		first, all, err := heldBy(wi, nss, next, start)
		if err != nil {
			return fmt.Errorf("edit %d of %s with no policy: %w", i, s.flags, err)
		}
		if i > 0 {
			s.stages[stageUnstagedFirst] = append(s.stages[stageUnstagedFirst], first)
			s.stages[stageUnstagedAll] = append(s.stages[stageUnstagedAll], all)
		}
		if err := waitFlagSetObserved(ctx, s.w.cp.Client, ff); err != nil {
			return err
		}
	}
	return nil
}

// policyUntil polls the size's policy until its status, of its
// generation, satisfies ok.
func (s *stagedSize) policyUntil(ctx context.Context, what string, ok func(deliveryv1alpha1.FeatureFlagRolloutPolicyStatus) bool) (*deliveryv1alpha1.FeatureFlagRolloutPolicy, error) {
	p := &deliveryv1alpha1.FeatureFlagRolloutPolicy{}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, benchTimeout, true, func(ctx context.Context) (bool, error) {
		if err := s.w.cp.Client.Get(ctx, client.ObjectKey{Namespace: s.flags, Name: benchFlagSet}, p); err != nil {
			return false, err
		}
		return p.Status.ObservedGeneration == p.Generation && ok(p.Status), nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s of %s (phase %q, step %d, message %q): %w", what, s.flags, p.Status.Phase, p.Status.Step, p.Status.Message, err)
	}
	return p, nil
}

func (s *stagedSize) stageNames() []string {
	return []string{stageFirstCM, stageAllCMs, stageFlagd, stageCompleted, stageUnstagedFirst, stageUnstagedAll}
}

func (s *stagedSize) close() {
	for _, c := range s.cancelers {
		c()
	}
	bg := context.Background()
	for _, ns := range append([]string{s.flags, s.canary}, s.wave...) {
		_ = s.w.cp.Client.Delete(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
}

// baselineP99s are the p99s of the measurements with no policy, at p.
func (sb *stagedBench) baselines(p float64) []float64 {
	var out []float64
	for _, m := range sb.measurements {
		if !m.policies {
			out = append(out, ms(percentile(m.d, p)))
		}
	}
	slices.Sort(out)
	return out
}

// noise is how far apart the baselines are, at p: (max − min) ÷ median.
func (sb *stagedBench) noise(p float64) float64 {
	b := sb.baselines(p)
	if len(b) == 0 {
		return 0
	}
	return (b[len(b)-1] - b[0]) / b[len(b)/2]
}

// ratio is a measurement's time at p over the baselines' median.
func (sb *stagedBench) ratio(m editMeasurement, p float64) float64 {
	b := sb.baselines(p)
	if len(b) == 0 {
		return 0
	}
	return ms(percentile(m.d, p)) / b[len(b)/2]
}

// worstPolicyRatio is the largest ratio of a measurement with policies, at p.
func (sb *stagedBench) worstPolicyRatio(p float64) float64 {
	worst := 0.0
	for _, m := range sb.measurements {
		if m.policies {
			worst = max(worst, sb.ratio(m, p))
		}
	}
	return worst
}

// table renders both figures.
func (sb *stagedBench) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Promote → the promoted step's consumers serving the revision, %d rollouts per size (times from writing the promote annotation)\n\n", sb.rollouts)
	fmt.Fprintf(&b, "| consumers in the step | stage | p50 ms | p99 ms | max ms |\n|--:|---|--:|--:|--:|\n")
	for _, s := range sb.sizes {
		for _, st := range s.stageNames() {
			d := s.stages[st]
			fmt.Fprintf(&b, "| %d | %s | %.1f | %.1f | %.1f |\n", s.size, st, ms(percentile(d, 0.5)), ms(percentile(d, 0.99)), ms(percentile(d, 1)))
		}
	}
	fmt.Fprintf(&b, "\n(no policy: an edit of the same flag set before its policy existed, to the ConfigMaps of all its consumers, the canary's too)\n")
	for _, s := range sb.sizes {
		p, u := s.stages[stageAllCMs], s.stages[stageUnstagedAll]
		fmt.Fprintf(&b, "  %3d consumers: promote → every ConfigMap ÷ edit with no policy → every ConfigMap: p50 %.2f×, p99 %.2f×\n", s.size,
			ms(percentile(p, 0.5))/ms(percentile(u, 0.5)), ms(percentile(p, 0.99))/ms(percentile(u, 0.99)))
	}
	fmt.Fprintf(&b, "\nEdit → ConfigMap of a flag set no policy targets, %d edits per measurement, in the order measured\n\n", sb.edits)
	fmt.Fprintf(&b, "| cluster | p50 ms | p99 ms | max ms | p50 ÷ baselines' median | p99 ÷ baselines' median |\n|---|--:|--:|--:|--:|--:|\n")
	for _, m := range sb.measurements {
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.1f | %.2f× | %.2f× |\n", m.name, ms(percentile(m.d, 0.5)), ms(percentile(m.d, 0.99)), ms(percentile(m.d, 1)),
			sb.ratio(m, 0.5), sb.ratio(m, 0.99))
	}
	fmt.Fprintf(&b, "\nnoise, the baselines' (max − min) ÷ median: p50 ±%.0f %%, p99 ±%.0f %%\n", sb.noise(0.5)*100, sb.noise(0.99)*100)
	for _, m := range sb.measurements {
		if !m.policies {
			continue
		}
		for _, p := range []float64{0.5, 0.99} {
			verdict := "within"
			if r := sb.ratio(m, p); r-1 > sb.noise(p) {
				verdict = "**outside**"
			}
			fmt.Fprintf(&b, "%s, p%.0f: %.2f×, %s noise\n", m.name, p*100, sb.ratio(m, p), verdict)
		}
	}
	return b.String()
}
