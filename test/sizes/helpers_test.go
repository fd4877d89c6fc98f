package sizes

import (
	"context"
	"fmt"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/flagdapi"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

// largeFlags is the size of the flag sets of these specs: 2,500 flags of
// about 480 bytes each rendered for flagd, some 1.2 MB.
const largeFlags = 2500

// flagSet is a FeatureFlag of n boolean flags, flag-00000 and on, each at
// the default variant given and with a description of 360 bytes: about 480
// bytes a flag rendered for flagd.
func flagSet(ns, name string, n int, variant string) *v1beta1.FeatureFlag {
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	ff.Spec.FlagSpec.Flags = make(map[string]v1beta1.Flag, n)
	description := strings.Repeat("d", 360)
	for i := range n {
		ff.Spec.FlagSpec.Flags[flagKey(i)] = v1beta1.Flag{State: v1beta1.FlagStateEnabled, DefaultVariant: variant,
			Variants: []byte(`{"on":true,"off":false}`), Metadata: []byte(`{"description":"` + description + `"}`)}
	}
	return ff
}

func flagKey(i int) string { return fmt.Sprintf("flag-%05d", i) }

// renderedSize is the size of ff rendered for flagd, as flagplane counts it.
func renderedSize(ff *v1beta1.FeatureFlag) int {
	GinkgoHelper()
	content, _, err := flagsets.Serve(ff)
	Expect(err).NotTo(HaveOccurred())
	return len(content)
}

// rendered is ff rendered for flagd: what a ConfigMap of it holds.
func rendered(ff *v1beta1.FeatureFlag) string {
	GinkgoHelper()
	content, _, err := flagsets.Serve(ff)
	Expect(err).NotTo(HaveOccurred())
	return content
}

// newNamespace gives a spec a namespace of its own, deleted after it; a
// failed spec reports the namespace's container logs and events.
func newNamespace(ctx context.Context, prefix string) string {
	GinkgoHelper()
	ns, err := cp.NewNamespace(ctx, prefix)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		if CurrentSpecReport().Failed() {
			AddReportEntry("container logs of namespace "+ns, n.LogsOf(ns))
			AddReportEntry("events of namespace "+ns, fixtures.Events(ctx, k8s, ns))
		}
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	})
	return ns
}

// warnings collects the admission warnings the API server passes on.
type warnings struct {
	mu   sync.Mutex
	text []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text = append(w.text, text)
}

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.text...)
}

// warned is a client whose calls' admission warnings w collects, as
// kubectl prints them.
func warned(w *warnings) client.Client {
	GinkgoHelper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: cp.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// update changes an object as it is now, retrying on conflicts; it
// returns the API server's answer to the last attempt.
func update[T client.Object](ctx context.Context, c client.Client, obj T, change func(T)) error {
	for {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		err := c.Update(ctx, obj)
		if err == nil || !strings.Contains(err.Error(), "the object has been modified") {
			return err
		}
	}
}

// condition returns a condition of the object as the API server holds it.
func condition(ctx context.Context, obj client.Object, t string) func() (metav1.Condition, error) {
	return func() (metav1.Condition, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return metav1.Condition{}, err
		}
		var conds []metav1.Condition
		switch o := obj.(type) {
		case *v1beta1.FeatureFlag:
			conds = o.Status.Conditions
		case *v1beta1.FeatureFlagSource:
			conds = o.Status.Conditions
		}
		if c := meta.FindStatusCondition(conds, t); c != nil {
			return *c, nil
		}
		return metav1.Condition{}, nil
	}
}

// flagSetStatus returns a FeatureFlag's status as the API server holds it.
func flagSetStatus(ctx context.Context, ff *v1beta1.FeatureFlag) func() (v1beta1.FeatureFlagStatus, error) {
	return func() (v1beta1.FeatureFlagStatus, error) {
		got := &v1beta1.FeatureFlag{}
		err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), got)
		return got.Status, err
	}
}

// warningEvents lists the notes of the Warning Events of a reason about an object.
func warningEvents(ctx context.Context, obj client.Object, reason string) func() ([]string, error) {
	return func() ([]string, error) {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
			return nil, err
		}
		var notes []string
		for _, e := range list.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == reason && e.Regarding.Name == obj.GetName() && e.Regarding.UID == obj.GetUID() {
				notes = append(notes, e.Note)
			}
		}
		return notes, nil
	}
}

// configMapData returns a ConfigMap's data as the API server holds it.
func configMapData(ctx context.Context, ns, name string) func() (map[string]string, error) {
	return func() (map[string]string, error) {
		cm := &corev1.ConfigMap{}
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm)
		return cm.Data, err
	}
}

// runningPod waits for the one pod of a workload (label app=name) whose
// flagd sidecar the node runs, and returns its name.
func runningPod(ctx context.Context, ns, app string) types.NamespacedName {
	GinkgoHelper()
	var name string
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		_, ok := n.Addr(types.NamespacedName{Namespace: ns, Name: pods.Items[0].Name}, "flagd", 8013)
		g.Expect(ok).To(BeTrue(), "flagd runs")
		name = pods.Items[0].Name
	}).Should(Succeed())
	return types.NamespacedName{Namespace: ns, Name: name}
}

// evaluates returns what the flagd sidecar of a pod evaluates a boolean
// flag to.
func evaluates(pod types.NamespacedName, key string) func() (any, error) {
	return func() (any, error) {
		addr, ok := n.Addr(pod, "flagd", 8013)
		if !ok {
			return nil, fmt.Errorf("no flagd in %s", pod)
		}
		e, err := flagdapi.Resolve(context.Background(), addr, flagdapi.Boolean, key, nil)
		if err != nil {
			return nil, err
		}
		if e.Code != "" {
			return nil, fmt.Errorf("flagd answers %s", e.Code)
		}
		return e.Value, nil
	}
}

// known waits until the operator's graph holds ff as it is: its status
// judges its generation. (Admission reads the graph: until then it cannot
// tell what reads the flag set, nor how large it is.)
func known(ctx context.Context, ff *v1beta1.FeatureFlag) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		got := &v1beta1.FeatureFlag{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	}).Should(Succeed())
}

// denied is how the API server words a refusal by flagplane's webhook of
// a kind.
func denied(kind, detail string) string {
	return `admission webhook "` + strings.ToLower(kind) + `s.flagplane.core.openfeature.dev" denied the request: ` + detail
}

// tooLargeForAConfigMap is how flagplane says that a flag set is larger
// than a ConfigMap holds (topology.Overflow.Message).
func tooLargeForAConfigMap(ns, name string, size int) string {
	return fmt.Sprintf("flag set %s/%s is %d bytes rendered for flagd, more than the 1048576 bytes (1 MiB) the API server lets a ConfigMap hold: "+
		"the file provider cannot deliver it; deliver it with provider flagd-proxy (the sync server, up to 4194304 bytes) or kubernetes, "+
		"or split it into smaller FeatureFlags", ns, name, size)
}
