package counts

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/flagdapi"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// newNamespace creates a namespace for a spec, named after prefix or, when
// name is set, exactly so, and deletes it afterwards (which stops its pods
// on the node). When the spec fails, the logs of every container that ran
// in it, and its Events, go into the report.
func newNamespace(ctx context.Context, name string) string {
	GinkgoHelper()
	ns := name
	if ns == "" {
		var err error
		ns, err = w.cp.NewNamespace(ctx, "counts")
		Expect(err).NotTo(HaveOccurred())
	} else {
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
		}).Should(Succeed(), "the default ServiceAccount of namespace %s", ns)
	}
	DeferCleanup(func(ctx SpecContext) {
		if CurrentSpecReport().Failed() {
			logs := n.LogsOf(ns)
			AddReportEntry("container logs of namespace "+ns, logs[max(0, len(logs)-20_000):])
			AddReportEntry("events of namespace "+ns, fixtures.Events(ctx, k8s, ns))
		}
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	})
	return ns
}

// create creates objects. A create whose admission webhook the API server
// could not reach in time is tried again: the machine these suites run on
// is shared, and a webhook starved of CPU for seconds says nothing of what
// is tested here (the timing specs measure the webhook; see timedCall).
func create(ctx context.Context, objs ...client.Object) {
	GinkgoHelper()
	for _, o := range objs {
		Eventually(func() error { return k8s.Create(ctx, o) }).WithTimeout(time.Minute).WithPolling(time.Second).
			Should(Or(Succeed(), Not(MatchError(ContainSubstring("failed calling webhook")))), "creating %T %s", o, o.GetName())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed(), "created %T %s", o, o.GetName())
	}
}

// flagSet is a FeatureFlag with one boolean flag, key, whose default
// variant is on.
func flagSet(ns, name, key string) *v1beta1.FeatureFlag {
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{
		key: {State: "ENABLED", Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: "on"},
	}
	return ff
}

// flagSets creates count flag sets named by name(i), the i-th holding the
// one flag flagKey(i).
func flagSets(ctx context.Context, ns string, count int, name func(int) string) {
	GinkgoHelper()
	for i := range count {
		create(ctx, flagSet(ns, name(i), flagKey(i)))
	}
}

// flagKey is the flag of the i-th flag set of flagSets.
func flagKey(i int) string { return fmt.Sprintf("flag-%03d", i) }

// shortName names the i-th flag set of a spec.
func shortName(i int) string { return fmt.Sprintf("fs-%03d", i) }

// longName is the i-th flag set name of the longest length (253).
func longName(i int) string { return fmt.Sprintf("fs-%04d-", i) + strings.Repeat("f", 245) }

// longestNamespace is a namespace name of the longest length (63), unique
// to a spec.
func longestNamespace(prefix string) string {
	return prefix + "-" + strings.Repeat("n", 62-len(prefix))
}

// entries are source entries of provider naming flag sets first..last-1.
func entries(provider v1beta1.SyncProviderType, first, last int, name func(int) string) []v1beta1.Source {
	var out []v1beta1.Source
	for i := first; i < last; i++ {
		out = append(out, v1beta1.Source{Source: name(i), Provider: provider})
	}
	return out
}

// deployment is a one-replica Deployment whose app container is an idle
// placeholder, with the given pod-template annotations.
func deployment(ns, name string, annotations map[string]string) *appsv1.Deployment {
	d := fixtures.Deployment(ns, name, nil, annotations)
	d.Spec.Template.Spec.Containers[0].Image = appImage
	// Replaced pods go at once: the node stops their processes within this.
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	return d
}

// podsOf lists the pods of an app that are not being deleted.
func podsOf(ctx context.Context, ns, app string) func() ([]corev1.Pod, error) {
	return func() ([]corev1.Pod, error) {
		var list corev1.PodList
		if err := k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
			return nil, err
		}
		var out []corev1.Pod
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				out = append(out, p)
			}
		}
		return out, nil
	}
}

func beReady() types.GomegaMatcher {
	return HaveField("Status.Conditions", ContainElement(And(HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))))
}

// readyPod waits until the app has exactly one pod, Ready, matching m, and
// returns it. Objects created together may reach the operator's informers
// in any order: a pod admitted before its source was seen is rolled by the
// healer, and this waits for its successor.
func readyPod(ctx context.Context, ns, app string, m types.GomegaMatcher, timeout time.Duration) *corev1.Pod {
	GinkgoHelper()
	var pods []corev1.Pod
	Eventually(func(g Gomega) {
		var err error
		pods, err = podsOf(ctx, ns, app)()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods).To(ConsistOf(And(beReady(), m)))
	}).WithTimeout(timeout).Should(Succeed(), "the pod of %s/%s never came up Ready", ns, app)
	return &pods[0]
}

// injected matches a pod admitted with flagplane's injection.
func injected() types.GomegaMatcher {
	return HaveField("ObjectMeta.Annotations", HaveKey(restarts.AnnotationInjection))
}

// sidecarOf returns the injected flagd of a pod.
func sidecarOf(pod *corev1.Pod) *corev1.Container {
	GinkgoHelper()
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == injection.SidecarName {
			return &pod.Spec.InitContainers[i]
		}
	}
	Fail("pod " + pod.Name + " has no injected flagd")
	return nil
}

// sourcesOf reads flagd's --sources of a sidecar.
func sourcesOf(c *corev1.Container) []injection.FlagdSourceConfig {
	GinkgoHelper()
	i := slices.Index(c.Args, "--sources")
	Expect(i).To(BeNumerically(">=", 0), "no --sources")
	var out []injection.FlagdSourceConfig
	Expect(json.Unmarshal([]byte(c.Args[i+1]), &out)).To(Succeed())
	return out
}

// flagdAddr is where the node serves the injected flagd's evaluation API
// (its port 8013, remapped).
func flagdAddr(pod *corev1.Pod) string {
	GinkgoHelper()
	addr, ok := n.Addr(client.ObjectKeyFromObject(pod), injection.SidecarName, 8013)
	Expect(ok).To(BeTrue(), "no host port for flagd's evaluation port of pod %s", pod.Name)
	return addr
}

// resolve evaluates a boolean flag over flagd's HTTP API at addr.
func resolve(addr, key string) func() (flagdapi.Evaluation, error) {
	return func() (flagdapi.Evaluation, error) {
		return flagdapi.Resolve(context.Background(), addr, flagdapi.Boolean, key, nil)
	}
}

// on is the evaluation of a flag of flagSet.
var on = flagdapi.Evaluation{Value: true, Variant: "on", Reason: "STATIC"}

// eventsAbout lists the Events of a namespace about one object.
func eventsAbout(ctx context.Context, ns, kind, name string) func() ([]eventsv1.Event, error) {
	return func() ([]eventsv1.Event, error) {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		var out []eventsv1.Event
		for _, e := range list.Items {
			if e.Regarding.Kind == kind && e.Regarding.Name == name {
				out = append(out, e)
			}
		}
		return out, nil
	}
}

// webhookSeconds reads, from the API server's own metrics, how long it has
// spent calling an admission webhook (by its name in the webhook
// configuration), summed over every call so far, and how many calls.
// The difference over one call is that call's duration as the API server
// measured it: the figure that webhook timeoutSeconds bounds.
func webhookSeconds(ctx context.Context, webhook string) (seconds float64, calls int) {
	GinkgoHelper()
	cs, err := kubernetes.NewForConfig(w.cp.Config)
	Expect(err).NotTo(HaveOccurred())
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	for _, l := range strings.Split(string(raw), "\n") {
		// Creates only: deleting a namespace updates its objects meanwhile.
		if !strings.Contains(l, `name="`+webhook+`"`) || !strings.Contains(l, `operation="CREATE"`) {
			continue
		}
		fields := strings.Fields(l)
		v, _ := strconv.ParseFloat(fields[len(fields)-1], 64)
		switch {
		case strings.HasPrefix(l, "apiserver_admission_webhook_admission_duration_seconds_sum"):
			seconds += v
		case strings.HasPrefix(l, "apiserver_admission_webhook_admission_duration_seconds_count"):
			calls += int(v)
		}
	}
	return seconds, calls
}

// The webhooks' names in config/webhook.
const (
	podWebhook         = "pods.flagplane.core.openfeature.dev"
	featureFlagWebhook = "featureflags.flagplane.core.openfeature.dev"
	sourceWebhook      = "featureflagsources.flagplane.core.openfeature.dev"
)

// timedCall runs call, which makes one request that webhook admits, and
// returns how long the API server spent in the webhook (from its metrics).
// The API server calls a webhook again when the connection broke (under a
// loaded machine, it does): the time is that of every call.
func timedCall(ctx context.Context, webhook string, call func()) time.Duration {
	GinkgoHelper()
	before, n := webhookSeconds(ctx, webhook)
	call()
	after, m := webhookSeconds(ctx, webhook)
	Expect(m).To(BeNumerically(">", n), "a call to %s", webhook)
	return time.Duration((after - before) * float64(time.Second))
}

// percentiles are the median and the largest of some durations.
func percentiles(ds []time.Duration) (p50, maximum time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)-1]
}

// programmed is the Programmed condition of a source.
func programmed(ctx context.Context, ns, name string) func() (*metav1.Condition, error) {
	return func() (*metav1.Condition, error) {
		src := &v1beta1.FeatureFlagSource{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, src); err != nil {
			return nil, err
		}
		for i := range src.Status.Conditions {
			if src.Status.Conditions[i].Type == v1beta1.ConditionProgrammed {
				return &src.Status.Conditions[i], nil
			}
		}
		return nil, nil
	}
}

// warnings collects the warnings of the API server's answers.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

var _ rest.WarningHandlerWithContext = (*warnings)(nil)

// createWarned creates obj and returns the admission's warnings, which
// kubectl would print.
func createWarned(ctx context.Context, obj client.Object) ([]string, error) {
	GinkgoHelper()
	collected := &warnings{}
	cfg := rest.CopyConfig(w.cp.Config)
	cfg.WarningHandlerWithContext = collected
	c, err := client.New(cfg, client.Options{Scheme: w.cp.Scheme})
	Expect(err).NotTo(HaveOccurred())
	err = c.Create(ctx, obj)
	collected.mu.Lock()
	defer collected.mu.Unlock()
	return collected.msgs, err
}
