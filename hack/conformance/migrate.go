package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/flagdapi"
	"github.com/flagplane/flagplane/test/realnode"
)

// A live migration off the OpenFeature Operator (-migrate, with -ofo-dir):
// OFO, built from the checkout, runs with two Deployments that read one
// FeatureFlag, one through a file-provider source and one through a
// kubernetes-provider source, while a pod that opts in is created every
// few seconds, the flag set is edited every few seconds, and every flagd
// is asked what it serves. Then the steps of docs/openfeature-operator.md,
// "Moving from the OpenFeature Operator", are followed as written:
// `flagplane migrate`, OFO uninstalled, flagplane installed with
// `kubectl apply --server-side --force-conflicts -k` of an overlay of
// config/default, the workloads `flagplane migrate` names rolled, and
// `flagplane migrate --apply` until nothing of OFO is left. Then the way
// back, with the same work running: flagplane's objects deleted but its
// CRDs, OFO installed again, and the Deployments rolled under it.
//
// What is reported comes from the real counterparts: the API server's
// answer to each pod create (admitted with a flagd container, without one,
// or refused), and flagd's own answers (flagd.evaluation.v1 ResolveInt of
// the flag whose value is the edit's number).

const (
	migrateNS   = "shop"
	versionFlag = "version"
	// churnEvery is how often a pod that opts in is created; churnKeep how
	// long it lives (the node has two cores).
	churnEvery = 2 * time.Second
	churnKeep  = 16 * time.Second
	editEvery  = 4 * time.Second
	pollEvery  = 500 * time.Millisecond
)

// migrationRun holds what was seen.
type migrationRun struct {
	c        *realnode.Cluster
	root     string
	flagdTag string

	mu      sync.Mutex
	phase   string
	edit    int // the value the flag set serves now
	pods    map[string]*polledPod
	created map[string]map[string]int // phase → outcome → pods
	// workloadMax is, per source, the highest value any of its pods answered.
	workloadMax map[string]int
	// older counts answers lower than one the same flagd gave before;
	// newerPodsBehind answers of a pod lower than its source's pods gave
	// before it was created (a new pod that starts on an older revision).
	older, behind, answers, failed int
	// stale counts answers, per phase and source, more than one edit
	// behind the value written last.
	stale    map[string]map[string]int
	perPhase map[string]int
	// bare are the creation times of the Jobs whose pod came without
	// flagd, on the way to flagplane (the way back's are in created).
	bare []time.Time
	// began is when OFO's uninstall began.
	began time.Time
	log   []string
}

type polledPod struct {
	last int
	seen bool
}

func (m *migrationRun) say(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	say("%s", line)
	m.mu.Lock()
	m.log = append(m.log, time.Now().Format("15:04:05")+" "+line)
	m.mu.Unlock()
}

func (m *migrationRun) setPhase(p string) {
	m.mu.Lock()
	m.phase = p
	m.mu.Unlock()
	m.say("phase: %s", p)
}

// migrate runs the migration on c, where OFO is installed and answers.
func migrate(ctx context.Context, c *realnode.Cluster, root, ofoDir, flagdTag, reportPath string) error {
	m := &migrationRun{c: c, root: root, flagdTag: flagdTag, pods: map[string]*polledPod{}, created: map[string]map[string]int{},
		workloadMax: map[string]int{}, stale: map[string]map[string]int{}, perPhase: map[string]int{}}
	cli := filepath.Join(root, "bin", "flagplane")
	say("building the CLI into %s", cli)
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", cli, "./cmd/flagplane").CombinedOutput(); err != nil {
		return fmt.Errorf("building the CLI: %w\n%s", err, out)
	}
	if err := m.createWork(ctx); err != nil {
		return err
	}
	m.setPhase("OFO")
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, loop := range []func(context.Context){m.churn, m.editLoop, m.poll} {
		wg.Go(func() { loop(runCtx) })
	}
	defer func() { stop(); wg.Wait() }()
	sleep(ctx, 20*time.Second)

	began := time.Now()
	m.setPhase("look")
	if err := m.cli(ctx, cli); err != nil {
		return err
	}
	m.setPhase("OFO uninstalled")
	m.mu.Lock()
	m.began = time.Now()
	m.mu.Unlock()
	if err := m.uninstallOFO(ctx, ofoDir); err != nil {
		return err
	}
	uninstalled := time.Now()
	m.setPhase("flagplane installing")
	if err := m.installFlagplane(ctx); err != nil {
		return err
	}
	window := time.Since(uninstalled)
	m.setPhase("flagplane installed")
	sleep(ctx, 10*time.Second)
	if err := m.cli(ctx, cli); err != nil {
		return err
	}
	m.setPhase("rolled")
	for _, d := range []string{"web-file", "web-kube"} {
		if out, err := c.Kubectl("-n", migrateNS, "rollout", "restart", "deployment/"+d); err != nil {
			return fmt.Errorf("rolling %s: %w\n%s", d, err, out)
		}
	}
	for _, d := range []string{"web-file", "web-kube"} {
		if out, err := c.Kubectl("-n", migrateNS, "rollout", "status", "deployment/"+d, "--timeout=5m"); err != nil {
			return fmt.Errorf("rolling %s: %w\n%s", d, err, out)
		}
	}
	m.setPhase("clean-up")
	left := true
	for i := 0; i < 10 && left; i++ {
		out, err := m.cliOut(ctx, cli, "migrate", "--apply")
		if err != nil {
			return err
		}
		left = !strings.Contains(out, "Nothing of the OpenFeature Operator is left.")
		if left {
			sleep(ctx, 5*time.Second)
		}
	}
	took := time.Since(began)
	m.setPhase("after")
	sleep(ctx, 30*time.Second)

	back, err := m.wayBack(ctx, ofoDir)
	if err != nil {
		return err
	}
	stop()
	wg.Wait()

	report := m.report(took, window, left, back)
	fmt.Print(report)
	if err := os.MkdirAll(filepath.Dir(reportPath), 0o755); err != nil {
		return err
	}
	return os.WriteFile(reportPath, []byte(report), 0o644)
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// createWork creates the namespace, the FeatureFlag, its two sources and
// their Deployments, and waits for the Deployments' pods.
func (m *migrationRun) createWork(ctx context.Context) error {
	c := m.c.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: migrateNS}}); err != nil {
		return err
	}
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: migrateNS, Name: "flags"}}
	ff.Spec.FlagSpec.Flags = versionFlags(0)
	if err := c.Create(ctx, ff); err != nil {
		return err
	}
	for _, p := range []string{"file", "kubernetes"} {
		src := &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: migrateNS, Name: sourceName(p)}}
		src.Spec.Sources = []v1beta1.Source{{Source: migrateNS + "/flags", Provider: v1beta1.SyncProviderType(p)}}
		if err := c.Create(ctx, src); err != nil {
			return err
		}
	}
	for _, p := range []string{"file", "kubernetes"} {
		name := "web-" + strings.TrimSuffix(sourceName(p), "-src")
		labels := map[string]string{"app": name}
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: migrateNS, Name: name}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: m.podTemplate(labels, sourceName(p)),
		}}
		if err := c.Create(ctx, d); err != nil {
			return err
		}
	}
	m.say("the work: FeatureFlag %s/flags, sources file-src (file) and kube-src (kubernetes), Deployments web-file and web-kube", migrateNS)
	m.say("flagd-proxy is left out: OFO's flagd-proxy image (v0.9.4) is not served here, so OFO cannot run that provider on this node")
	out, err := m.c.Kubectl("-n", migrateNS, "rollout", "status", "deployment/web-file", "deployment/web-kube", "--timeout=5m")
	if err != nil {
		return fmt.Errorf("the Deployments under OFO: %w\n%s", err, out)
	}
	return nil
}

func sourceName(provider string) string {
	if provider == "kubernetes" {
		return "kube-src"
	}
	return provider + "-src"
}

func (m *migrationRun) podTemplate(labels map[string]string, source string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{
			"openfeature.dev/enabled": "true", "openfeature.dev/featureflagsource": migrateNS + "/" + source}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](1), Containers: []corev1.Container{{
			Name: "app", Image: realnode.BusyboxImage, Command: []string{"sleep", "3600"},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m")}},
		}}},
	}
}

// versionFlags is the flag set whose flag "version" serves n.
func versionFlags(n int) map[string]v1beta1.Flag {
	return map[string]v1beta1.Flag{versionFlag: {State: "ENABLED", Variants: []byte(fmt.Sprintf(`{"current":%d}`, n)), DefaultVariant: "current"}}
}

// churn creates a Job whose pod opts in every churnEvery, alternating the
// sources (OFO refuses a pod without an owner), and deletes each after
// churnKeep; each is classified by what came of its pod: admitted with a
// flagd container or without, or refused (the Job controller's
// FailedCreate Event, the webhook's answer).
func (m *migrationRun) churn(ctx context.Context) {
	type job struct {
		name, phase string
		at          time.Time
		counted     bool
	}
	var jobs []*job
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(churnEvery):
		}
		source := []string{"file-src", "kube-src"}[i%2]
		m.mu.Lock()
		phase := m.phase
		m.mu.Unlock()
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: migrateNS, Name: fmt.Sprintf("churn-%d", i)},
			Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: m.podTemplate(map[string]string{"churn": "true"}, source)}}
		j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		if err := m.c.Client.Create(ctx, j); err != nil {
			if ctx.Err() == nil {
				m.say("job %s not created: %v", j.Name, err)
			}
			continue
		}
		jobs = append(jobs, &job{name: j.Name, phase: phase, at: time.Now()})
		for _, jb := range jobs {
			if !jb.counted && time.Since(jb.at) > 6*time.Second {
				jb.counted = true
				m.classify(ctx, jb.name, jb.phase, jb.at)
			}
		}
		if len(jobs) > 0 && time.Since(jobs[0].at) > churnKeep && jobs[0].counted {
			old := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: migrateNS, Name: jobs[0].name}}
			_ = m.c.Client.Delete(ctx, old, client.PropagationPolicy(metav1.DeletePropagationBackground), client.GracePeriodSeconds(0))
			jobs = jobs[1:]
		}
	}
}

// classify counts what came of a churn Job's pod.
func (m *migrationRun) classify(ctx context.Context, name, phase string, at time.Time) {
	outcome := "refused"
	pods := &corev1.PodList{}
	if err := m.c.Client.List(ctx, pods, client.InNamespace(migrateNS), client.MatchingLabels{"job-name": name}); err == nil && len(pods.Items) > 0 {
		outcome = "without flagd"
		if hasFlagd(&pods.Items[0]) {
			outcome = "with flagd"
		}
	}
	if outcome != "with flagd" {
		why := ""
		events := &corev1.EventList{}
		if err := m.c.Client.List(ctx, events, client.InNamespace(migrateNS)); err == nil {
			for _, e := range events.Items {
				if e.InvolvedObject.Name == name && e.Reason == "FailedCreate" {
					why = ": " + e.Message
				}
			}
		}
		m.say("job %s (created in phase %q): pod %s%s", name, phase, outcome, why)
	}
	m.mu.Lock()
	if m.created[phase] == nil {
		m.created[phase] = map[string]int{}
	}
	m.created[phase][outcome]++
	if outcome == "without flagd" && slices.Index(phases, phase) < slices.Index(phases, "flagplane uninstalled") {
		m.bare = append(m.bare, at)
	}
	m.mu.Unlock()
}

// editLoop sets the flag's value to the next number every editEvery.
func (m *migrationRun) editLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(editEvery):
		}
		m.mu.Lock()
		next := m.edit + 1
		m.mu.Unlock()
		ff := &v1beta1.FeatureFlag{}
		if err := m.c.Client.Get(ctx, client.ObjectKey{Namespace: migrateNS, Name: "flags"}, ff); err != nil {
			continue
		}
		ff.Spec.FlagSpec.Flags = versionFlags(next)
		if err := m.c.Client.Update(ctx, ff); err != nil {
			if ctx.Err() == nil {
				m.say("edit %d not written: %v", next, err)
			}
			continue
		}
		m.mu.Lock()
		m.edit = next
		m.mu.Unlock()
	}
}

// poll asks every running flagd of the namespace for the flag's value.
func (m *migrationRun) poll(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(pollEvery):
		}
		pods := &corev1.PodList{}
		if err := m.c.Client.List(ctx, pods, client.InNamespace(migrateNS)); err != nil {
			continue
		}
		var wg sync.WaitGroup
		for i := range pods.Items {
			pod := &pods.Items[i]
			if pod.Status.PodIP == "" || pod.DeletionTimestamp != nil || !flagdReady(pod) {
				continue
			}
			wg.Go(func() { m.ask(ctx, pod) })
		}
		wg.Wait()
	}
}

// hasFlagd tells whether a pod was admitted with a flagd container: a
// native sidecar (an init container that keeps running), as both
// operators inject it, or a container.
func hasFlagd(pod *corev1.Pod) bool {
	isFlagd := func(c corev1.Container) bool { return c.Name == "flagd" }
	return slices.ContainsFunc(pod.Spec.InitContainers, isFlagd) || slices.ContainsFunc(pod.Spec.Containers, isFlagd)
}

func flagdReady(pod *corev1.Pod) bool {
	for _, s := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		if s.Name == "flagd" {
			return s.Ready
		}
	}
	return false
}

// ask evaluates the flag at one pod's flagd and records the answer.
func (m *migrationRun) ask(ctx context.Context, pod *corev1.Pod) {
	source := pod.Annotations["openfeature.dev/featureflagsource"]
	m.mu.Lock()
	written, phase := m.edit, m.phase
	m.mu.Unlock()
	askCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	e, err := flagdapi.Resolve(askCtx, pod.Status.PodIP+":8013", flagdapi.Int, versionFlag, nil)
	m.mu.Lock()
	defer m.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	if err != nil || e.Code != "" {
		m.failed++
		return
	}
	n, err := strconv.Atoi(fmt.Sprint(e.Value))
	if err != nil {
		m.failed++
		return
	}
	m.record(string(pod.UID), pod.Name, source, phase, n, written)
}

// record counts one answer n of a pod's flagd, given the value written
// last; m.mu is held.
func (m *migrationRun) record(uid, name, source, phase string, n, written int) {
	m.answers++
	m.perPhase[phase]++
	if n < written-1 {
		// More than one edit behind what was written (one edit may be on
		// its way): stale.
		if m.stale[phase] == nil {
			m.stale[phase] = map[string]int{}
		}
		m.stale[phase][source]++
	}
	p, ok := m.pods[uid]
	if !ok {
		p = &polledPod{}
		m.pods[uid] = p
	}
	if p.seen && n < p.last {
		m.older++
		m.log = append(m.log, fmt.Sprintf("%s pod %s answered %d after %d", time.Now().Format("15:04:05"), name, n, p.last))
	}
	if !p.seen && n < m.workloadMax[source]-1 {
		m.behind++
	}
	p.seen, p.last = true, n
	m.workloadMax[source] = max(m.workloadMax[source], n)
}

func (m *migrationRun) cli(ctx context.Context, cli string) error {
	_, err := m.cliOut(ctx, cli, "migrate")
	return err
}

func (m *migrationRun) cliOut(ctx context.Context, cli string, args ...string) (string, error) {
	say("$ flagplane %s", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+m.c.KubeconfigPath)
	out, err := cmd.CombinedOutput()
	fmt.Print(string(out))
	if err != nil {
		return string(out), fmt.Errorf("flagplane %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// uninstallOFO deletes what OFO's install applied except its CRDs, as
// `helm uninstall` does (Helm keeps the CRDs), and waits until its manager
// is gone.
func (m *migrationRun) uninstallOFO(ctx context.Context, ofoDir string) error {
	out, err := m.c.Kubectl("kustomize", filepath.Join(ofoDir, "config", "default"))
	if err != nil {
		return fmt.Errorf("kubectl kustomize: %w\n%s", err, out)
	}
	var keep []string
	for doc := range strings.SplitSeq(out, "\n---\n") {
		// Helm keeps the CRDs; cert-manager's objects were never applied
		// (installOFO makes their Secrets).
		if strings.Contains(doc, "kind: CustomResourceDefinition\n") || strings.Contains(doc, "apiVersion: cert-manager.io/") {
			continue
		}
		keep = append(keep, doc)
	}
	say("$ kubectl delete --ignore-not-found -f - (OFO's objects but its CRDs, as helm uninstall)")
	if out, err := m.c.KubectlWithInput(strings.NewReader(strings.Join(keep, "\n---\n")), "delete", "--ignore-not-found", "--wait=true", "--timeout=3m", "-f", "-"); err != nil {
		return fmt.Errorf("uninstalling OFO: %w\n%s", err, out)
	}
	return nil
}

// installFlagplane applies an overlay of config/default with OFO's flagd
// tag and the run's CPU request, and waits until its webhooks answer.
func (m *migrationRun) installFlagplane(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "flagplane-migrate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	base, err := filepath.Rel(dir, filepath.Join(m.root, "config", "default"))
	if err != nil {
		return err
	}
	overlay := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [%s]
patches:
- target: {kind: Deployment, name: flagplane-controller-manager}
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --sidecar-tag=%s
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --sidecar-cpu-request=%s
`, base, m.flagdTag, cpuRequest)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		return err
	}
	say("$ kubectl apply --server-side --force-conflicts -k <overlay of config/default: --sidecar-tag=%s --sidecar-cpu-request=%s>", m.flagdTag, cpuRequest)
	out, err := m.c.Kubectl("apply", "--server-side", "--force-conflicts", "-k", dir)
	if err != nil {
		return fmt.Errorf("installing flagplane: %w\n%s", err, out)
	}
	if out, err := m.c.Kubectl("-n", "flagplane-system", "rollout", "status", "deployment", "--timeout=5m"); err != nil {
		return fmt.Errorf("flagplane's manager: %w\n%s", err, out)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		probe := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "probe"}}
		probe.Spec.FlagSpec.Flags = versionFlags(0)
		if err := m.c.Client.Create(ctx, probe, client.DryRunAll); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("flagplane's webhooks do not answer: %w", err)
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// phases in the order they run: the move to flagplane, and the way back.
var phases = []string{"OFO", "look", "OFO uninstalled", "flagplane installing", "flagplane installed", "rolled", "clean-up", "after",
	"flagplane uninstalled", "OFO installing", "OFO installed", "rolled back", "after, back"}

func (m *migrationRun) report(took, window time.Duration, left bool, back wayBackRun) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "A live migration off the OpenFeature Operator on the real node (file and kubernetes providers; a pod created every %s, the flag set edited every %s, every flagd asked every %s):\n\n", churnEvery, editEvery, pollEvery)
	fmt.Fprintf(&b, "| phase | pods (of Jobs) admitted with flagd | without flagd | refused | flagd answers | more than one edit behind: file | kubernetes |\n|---|--:|--:|--:|--:|--:|--:|\n")
	total := map[string]int{}
	for _, p := range phases {
		c := m.created[p]
		for k, v := range c {
			total[k] += v
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d |\n", p, c["with flagd"], c["without flagd"], c["refused"], m.perPhase[p],
			m.stale[p][migrateNS+"/file-src"], m.stale[p][migrateNS+"/kube-src"])
	}
	fmt.Fprintf(&b, "| **all** | %d | %d | %d | %d | | |\n\n", total["with flagd"], total["without flagd"], total["refused"], m.answers)
	fmt.Fprintf(&b, "- flagd answers older than one the same flagd gave before: **%d** (of %d; %d asks got no answer)\n", m.older, m.answers, m.failed)
	fmt.Fprintf(&b, "- new pods whose first answer was more than one edit behind what their source's pods had served: %d\n", m.behind)
	fmt.Fprintf(&b, "- `flagplane migrate` first run to nothing of OFO left: %s; OFO uninstalled to flagplane's webhooks answering: %s\n", took.Round(time.Second), window.Round(100*time.Millisecond))
	if len(m.bare) > 0 {
		fmt.Fprintf(&b, "- pods admitted without flagd were created from %s to %s after OFO's uninstall began\n",
			m.bare[0].Sub(m.began).Round(100*time.Millisecond), m.bare[len(m.bare)-1].Sub(m.began).Round(100*time.Millisecond))
	}
	fmt.Fprintf(&b, "- the way back, flagplane's uninstall to the Deployments rolled under OFO: %s; flagplane uninstalled to OFO's webhook answering: %s\n",
		back.took.Round(time.Second), back.window.Round(100*time.Millisecond))
	if left {
		b.WriteString("- `flagplane migrate --apply` still found something of OFO after 10 runs\n")
	}
	b.WriteString("\nWhat happened, in order:\n\n")
	for _, l := range m.log {
		fmt.Fprintf(&b, "    %s\n", l)
	}
	return b.String()
}
