package flagd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
)

// flagKey is the one flag of the flag sets (fixtures.FlagSet).
const flagKey = fixtures.FlagKey

// newNamespace creates a namespace for a spec and deletes it afterwards
// (which stops its pods on the node). When the spec fails, the logs of
// every container that ran in it, and its Events, go into the report.
func newNamespace(ctx context.Context, prefix string) string {
	GinkgoHelper()
	ns, err := cp.NewNamespace(ctx, prefix)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		if CurrentSpecReport().Failed() {
			AddReportEntry("container logs of namespace "+ns, n.LogsOf(ns))
			AddReportEntry("events of namespace "+ns, eventsOf(ctx, ns))
		}
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	})
	return ns
}

func eventsOf(ctx context.Context, ns string) string { return fixtures.Events(ctx, k8s, ns) }

func create(ctx context.Context, objs ...client.Object) {
	GinkgoHelper()
	for _, o := range objs {
		Expect(k8s.Create(ctx, o)).To(Succeed(), "creating %T %s", o, o.GetName())
	}
}

// flagSet is a FeatureFlag with one boolean flag, flagKey, at variant.
func flagSet(ns, name, variant string) *v1beta1.FeatureFlag {
	return fixtures.FlagSet(ns, name, variant)
}

// setVariant edits the default variant of a FeatureFlag's flag.
func setVariant(ctx context.Context, ff *v1beta1.FeatureFlag, variant string) {
	GinkgoHelper()
	Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ff), ff); err != nil {
			return err
		}
		f := ff.Spec.FlagSpec.Flags[flagKey]
		f.DefaultVariant = variant
		ff.Spec.FlagSpec.Flags[flagKey] = f
		return k8s.Update(ctx, ff)
	}).Should(Succeed())
}

// source is a FeatureFlagSource with the given entries.
func source(ns, name string, entries ...v1beta1.Source) *v1beta1.FeatureFlagSource {
	return fixtures.Source(ns, name, entries)
}

// newFlagd is a Flagd of one replica running source, changed by mutate.
func newFlagd(ns, name, source string, mutate ...func(*v1beta1.Flagd)) *v1beta1.Flagd {
	f := &v1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	f.Spec.FeatureFlagSource = source
	for _, m := range mutate {
		m(f)
	}
	return f
}

// update changes an object as it is now, retrying on conflicts.
func update[T client.Object](ctx context.Context, obj T, change func(T)) {
	GinkgoHelper()
	Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return k8s.Update(ctx, obj)
	}).Should(Succeed())
}

// getter returns the object as the API server has it now.
func getter[T client.Object](ctx context.Context, obj T) func() (T, error) {
	return func() (T, error) {
		return obj, k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	}
}

// haveCondition matches a Flagd whose condition t has status s (and reason, when given).
func haveCondition(t string, s metav1.ConditionStatus, reason ...string) types.GomegaMatcher {
	return WithTransform(func(f *v1beta1.Flagd) *metav1.Condition {
		c := meta.FindStatusCondition(f.Status.Conditions, t)
		if c != nil && c.ObservedGeneration != f.Generation {
			return nil // about an older spec
		}
		return c
	}, And(Not(BeNil()), HaveField("Status", s), WithTransform(func(c *metav1.Condition) string {
		if len(reason) == 0 {
			return ""
		}
		return c.Reason
	}, Equal(strings.Join(reason, "")))))
}

// beServing matches a Flagd that is programmed and has a ready replica.
func beServing() types.GomegaMatcher {
	return And(haveCondition(v1beta1.ConditionProgrammed, metav1.ConditionTrue),
		haveCondition(v1beta1.ConditionAvailable, metav1.ConditionTrue))
}

// serviceAddr resolves a Service's port the way kube-proxy would, on a
// node without cluster IPs: the Service's selector to a ready pod that is
// not going away, the port's targetPort (a number or a name) to one of
// that pod's container ports, and that to the host port the node mapped it
// to. It fails when the Service selects no ready pod or its port targets
// none of the pod's ports.
func serviceAddr(ctx context.Context, ns, name, port string) (string, error) {
	svc := &corev1.Service{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
		return "", err
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == port {
			sp = &svc.Spec.Ports[i]
		}
	}
	if sp == nil {
		return "", fmt.Errorf("Service %s/%s has no port %q", ns, name, port)
	}
	if len(svc.Spec.Selector) == 0 {
		return "", fmt.Errorf("Service %s/%s selects no pods", ns, name)
	}
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(svc.Spec.Selector)}); err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || !podReady(&p) {
			continue
		}
		for _, c := range p.Spec.Containers {
			for _, cport := range c.Ports {
				if (sp.TargetPort.Type == intstr.Int && sp.TargetPort.IntVal == cport.ContainerPort) ||
					(sp.TargetPort.Type == intstr.String && sp.TargetPort.StrVal == cport.Name) {
					if addr, ok := n.Addr(k8stypes.NamespacedName{Namespace: ns, Name: p.Name}, c.Name, cport.ContainerPort); ok {
						return addr, nil
					}
				}
			}
		}
		return "", fmt.Errorf("port %s of Service %s/%s (targetPort %s) targets none of the ports of pod %s", port, ns, name, sp.TargetPort.String(), p.Name)
	}
	return "", fmt.Errorf("Service %s/%s selects no ready pod (of %d)", ns, name, len(pods.Items))
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// rpcVariant evaluates flagKey over flagd's evaluation API (Connect, the
// HTTP form of its gRPC service) through the Service's port "flagd".
func rpcVariant(ctx context.Context, ns, service string) func() (string, error) {
	return rpcVariantOf(ctx, ns, service, flagKey)
}

// rpcVariantOf is rpcVariant of another flag.
func rpcVariantOf(ctx context.Context, ns, service, flagKey string) func() (string, error) {
	return func() (string, error) {
		addr, err := serviceAddr(ctx, ns, service, "flagd")
		if err != nil {
			return "", err
		}
		var e struct {
			Variant string `json:"variant"`
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		if err := post("http://"+addr+"/flagd.evaluation.v1.Service/ResolveBoolean", `{"flagKey":"`+flagKey+`","context":{}}`, &e); err != nil {
			return "", err
		}
		if e.Code != "" {
			return "", fmt.Errorf("%s: %s", e.Code, e.Message)
		}
		return e.Variant, nil
	}
}

// ofrepVariant evaluates flagKey over OFREP through the Service's port "ofrep".
func ofrepVariant(ctx context.Context, ns, service string) func() (string, error) {
	return func() (string, error) {
		addr, err := serviceAddr(ctx, ns, service, "ofrep")
		if err != nil {
			return "", err
		}
		var e struct {
			Variant   string `json:"variant"`
			ErrorCode string `json:"errorCode"`
		}
		if err := post("http://"+addr+"/ofrep/v1/evaluate/flags/"+flagKey, `{"context":{}}`, &e); err != nil {
			return "", err
		}
		if e.ErrorCode != "" {
			return "", fmt.Errorf("OFREP: %s", e.ErrorCode)
		}
		return e.Variant, nil
	}
}

func post(url, body string, into any) error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, into); err != nil {
		return fmt.Errorf("decoding %q (HTTP %d): %w", data, resp.StatusCode, err)
	}
	return nil
}

// deploymentOf returns a Flagd's Deployment.
func deploymentOf(ctx context.Context, ns, name string) func() (*appsv1.Deployment, error) {
	return func() (*appsv1.Deployment, error) {
		d := &appsv1.Deployment{}
		return d, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d)
	}
}

// absent tells whether an object of the kind of obj and this name does not exist.
func absent(ctx context.Context, obj client.Object, ns, name string) func() (bool, error) {
	return func() (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
}

// flagdPods lists the pods of a Flagd that are not going away.
func flagdPods(ctx context.Context, ns, name string) func() ([]corev1.Pod, error) {
	return func() ([]corev1.Pod, error) {
		var list corev1.PodList
		if err := k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"app": name}); err != nil {
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
