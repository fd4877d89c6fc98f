package ofo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// The names the OpenFeature Operator's sidecar scenarios use.
const (
	appLabel     = "open-feature-e2e-test"
	appContainer = "open-feature-e2e-test"
	nginxImage   = "nginx:stable-alpine"
	flagKey      = "simple-flag"
	// flagdAnswer is what the scenarios' curl Job requires in flagd's answer
	// for simple-flag, with whitespace removed.
	flagdAnswer = `"value":true,"reason":"STATIC","variant":"on"`
)

// newNamespace creates the namespace of a scenario (the OpenFeature
// Operator's chainsaw runs each in a fresh one). When the spec fails, the
// report gets the logs of every container the node ran in it, and the pods
// and events as the API server has them.
func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	ns, err := cp.NewNamespace(ctx, "ofo")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		if CurrentSpecReport().Failed() {
			AddReportEntry("container logs of namespace "+ns, n.LogsOf(ns))
			pods, _, _ := kubectl("get", "pods", "-n", ns, "-o", "yaml")
			AddReportEntry("pods of namespace "+ns, pods)
			events, _, _ := kubectl("get", "events", "-n", ns, "--sort-by=.lastTimestamp")
			AddReportEntry("events of namespace "+ns, events)
		}
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	})
	return ns
}

// kubectl runs kubectl against the control plane as its administrator and
// returns its standard output and standard error (where it prints the API
// server's warnings).
func kubectl(args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cp.KubectlPath, append([]string{
		"--kubeconfig=" + cp.KubeconfigPath, "--cache-dir=" + filepath.Join(cp.Dir, "kubectl-cache")}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.KubeconfigPath, "KUBERC=off")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	GinkgoWriter.Printf("$ kubectl %s\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
	return out.String(), errOut.String(), err
}

// testdata is the path of a scenario's manifest.
func testdata(scenario, file string) string { return filepath.Join("testdata", scenario, file) }

// apply applies a manifest of testdata to namespace ns, unchanged, as a
// user would, and returns what kubectl printed on standard error
// (warnings).
func apply(ns, scenario, file string) string {
	GinkgoHelper()
	_, stderr, err := kubectl("apply", "-n", ns, "-f", testdata(scenario, file))
	Expect(err).NotTo(HaveOccurred(), "kubectl apply -f %s: %s", testdata(scenario, file), stderr)
	return stderr
}

// appPods lists the pods of the scenario's Deployment that are not being
// deleted: what is left once a rollout is over.
func appPods(ctx context.Context, ns string) func() ([]corev1.Pod, error) {
	return func() ([]corev1.Pod, error) {
		var list corev1.PodList
		if err := k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"app": appLabel}); err != nil {
			return nil, err
		}
		var live []corev1.Pod
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		return live, nil
	}
}

// theAppPod waits until the Deployment has exactly one pod, and it matches
// m, and returns it.
func theAppPod(ctx context.Context, ns string, m types.GomegaMatcher) corev1.Pod {
	GinkgoHelper()
	var pods []corev1.Pod
	Eventually(func(g Gomega) {
		var err error
		pods, err = appPods(ctx, ns)()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods).To(ConsistOf(m), "the pods of the Deployment:\n%s", describe(pods))
	}).Should(Succeed())
	return pods[0]
}

// describe summarises pods for a failure message: what the scenarios
// assert, and how far the node got.
func describe(pods []corev1.Pod) string {
	var b strings.Builder
	line := func(kind string, c corev1.Container, statuses []corev1.ContainerStatus) {
		state := "no status"
		for _, s := range statuses {
			if s.Name == c.Name {
				switch {
				case s.State.Running != nil:
					state = "running"
				case s.State.Waiting != nil:
					state = "waiting: " + s.State.Waiting.Reason + " " + s.State.Waiting.Message
				case s.State.Terminated != nil:
					state = "terminated: " + s.State.Terminated.Reason
				}
			}
		}
		var env []string
		for _, e := range c.Env {
			env = append(env, e.Name+"="+e.Value)
		}
		fmt.Fprintf(&b, "    %s %s %s (%s) env %v\n", kind, c.Name, c.Image, state, env)
	}
	for _, p := range pods {
		fmt.Fprintf(&b, "  pod %s on %q, annotations %v\n", p.Name, p.Spec.NodeName, p.Annotations)
		for _, c := range p.Spec.InitContainers {
			line("init container", c, p.Status.InitContainerStatuses)
		}
		for _, c := range p.Spec.Containers {
			line("container", c, p.Status.ContainerStatuses)
		}
	}
	return b.String()
}

func key(p corev1.Pod) k8stypes.NamespacedName {
	return k8stypes.NamespacedName{Namespace: p.Namespace, Name: p.Name}
}

// Matchers of pods, each a field the OpenFeature Operator's assert files
// name. Lists are matched as chainsaw matches them: same length, element by
// element.

func haveAnnotations(kv ...string) types.GomegaMatcher {
	var ms []types.GomegaMatcher
	for i := 0; i+1 < len(kv); i += 2 {
		ms = append(ms, HaveKeyWithValue(kv[i], kv[i+1]))
	}
	return HaveField("ObjectMeta.Annotations", And(ms...))
}

func haveLabel(k, v string) types.GomegaMatcher {
	return HaveField("ObjectMeta.Labels", HaveKeyWithValue(k, v))
}

// haveContainers matches a pod's containers, in order.
func haveContainers(ms ...any) types.GomegaMatcher {
	return HaveField("Spec.Containers", HaveExactElements(ms...))
}

// haveInitContainers matches a pod's init containers, in order.
func haveInitContainers(ms ...any) types.GomegaMatcher {
	return HaveField("Spec.InitContainers", HaveExactElements(ms...))
}

func container(name, image string) types.GomegaMatcher {
	return And(HaveField("Name", name), HaveField("Image", image))
}

// runningOnNode matches a pod whose every container, init containers
// included, runs on the test node (not: has completed, is waiting).
func runningOnNode() types.GomegaMatcher {
	notRunning := ContainElement(HaveField("State.Running", BeNil()))
	return And(
		HaveField("Spec.NodeName", n.Name()),
		HaveField("Status.ContainerStatuses", And(Not(BeEmpty()), Not(notRunning))),
		HaveField("Status.InitContainerStatuses", Not(notRunning)),
	)
}

// askFlagd asks the flagd of a pod for simple-flag as the scenarios' curl
// Job does — a POST of {"flagKey":"simple-flag","context":{}} to
// /schema.v1.Service/ResolveBoolean on flagd's port 8013, which nginx
// proxies to — here on the host port the node gave that port. It returns
// the answer with whitespace removed.
func askFlagd(p corev1.Pod) func() (string, error) { return askFlagdOn(p, 8013) }

// askFlagdOn is askFlagd on another port of the container flagd.
func askFlagdOn(p corev1.Pod, port int32) func() (string, error) {
	return func() (string, error) {
		addr, ok := n.Addr(key(p), "flagd", port)
		if !ok {
			return "", fmt.Errorf("no container flagd listens on port %d of pod %s", port, p.Name)
		}
		return resolveBoolean(addr)
	}
}

// httpClient asks with a deadline: a port that accepts and never answers
// is no answer.
var httpClient = &http.Client{Timeout: 5 * time.Second}

// resolveBoolean sends the scenarios' request for simple-flag to addr and
// returns a 200 answer with whitespace removed; any other answer, or none,
// is an error.
func resolveBoolean(addr string) (string, error) {
	body := `{"flagKey":"` + flagKey + `","context":{}}`
	resp, err := httpClient.Post("http://"+addr+"/schema.v1.Service/ResolveBoolean", "application/json", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("flagd answered %d: %s", resp.StatusCode, data)
	}
	return strings.Join(strings.Fields(string(data)), ""), nil
}

// flagAnswers sends the scenarios' request for simple-flag to every port
// the pod's containers declare, init containers included — on the host
// port the node gave each, there being no pod network — and lists, as
// "container:port", those that answer with the flag's value. A declared
// port the node did not map is an error: the question was not asked.
func flagAnswers(p corev1.Pod) func() ([]string, error) {
	return func() ([]string, error) {
		var answered []string
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			for _, port := range c.Ports {
				addr, ok := n.Addr(key(p), c.Name, port.ContainerPort)
				if !ok {
					return nil, fmt.Errorf("the node gave port %d of container %s of pod %s no host port", port.ContainerPort, c.Name, p.Name)
				}
				if answer, err := resolveBoolean(addr); err == nil && strings.Contains(answer, flagdAnswer) {
					answered = append(answered, fmt.Sprintf("%s:%d", c.Name, port.ContainerPort))
				}
			}
		}
		return answered, nil
	}
}

// patchPodAnnotation sets an annotation of a Deployment's pod template, as
// a user would with kubectl: the Deployment rolls.
func patchPodAnnotation(ns, deployment, k, v string) {
	GinkgoHelper()
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{k: v}}}}})
	Expect(err).NotTo(HaveOccurred())
	_, stderr, err := kubectl("patch", "deployment", deployment, "-n", ns, "--type=merge", "-p", string(patch))
	Expect(err).NotTo(HaveOccurred(), "kubectl patch: %s", stderr)
}

// sourceTargets are the workloads a FeatureFlagSource's status says it
// applies to.
func sourceTargets(ctx context.Context, src *v1beta1.FeatureFlagSource) func() ([]v1beta1.WorkloadReference, error) {
	return func() ([]v1beta1.WorkloadReference, error) {
		got := &v1beta1.FeatureFlagSource{}
		err := k8s.Get(ctx, client.ObjectKeyFromObject(src), got)
		return got.Status.Targets, err
	}
}

// flagSetConfigMap is the ConfigMap flagplane generates in ns for the
// scenarios' flag set when a file source of a pod there delivers it
// (flagd.<namespace>.<name>).
func flagSetConfigMap(ns string) client.ObjectKey {
	return client.ObjectKey{Namespace: ns, Name: "flagd." + ns + ".end-to-end-test"}
}

// manifest reads a one-object manifest of testdata.
func manifest(scenario, file string) *unstructured.Unstructured {
	GinkgoHelper()
	data, err := os.ReadFile(testdata(scenario, file))
	Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{}
	Expect(yaml.Unmarshal(data, &u.Object)).To(Succeed())
	return u
}

// stored gets the object a manifest names from namespace ns.
func stored(ctx context.Context, ns string, m *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(m.GroupVersionKind())
	return got, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.GetName()}, got)
}

// matchManifest matches an object that holds everything of a manifest, as
// chainsaw's assert does: maps may hold more keys, lists must have the same
// length and match element by element, values must be equal.
func matchManifest(m *unstructured.Unstructured) types.GomegaMatcher {
	want := m.Object
	return WithTransform(func(u *unstructured.Unstructured) error {
		if u == nil {
			return errors.New("no object")
		}
		return holds(u.Object, want, "")
	}, Succeed())
}

func holds(got, want any, path string) error {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %v is not a map", path, got)
		}
		for k, v := range w {
			if err := holds(g[k], v, path+"."+k); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: %v is not a list of %d", path, got, len(w))
		}
		for i := range w {
			if err := holds(g[i], w[i], fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	default:
		if reflect.DeepEqual(number(got), number(want)) {
			return nil
		}
		return fmt.Errorf("%s: %v (%T), want %v (%T)", path, got, got, want, want)
	}
}

// number makes JSON numbers comparable: int64 from the API, float64 from
// YAML.
func number(v any) any {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case int:
		return float64(x)
	}
	return v
}
