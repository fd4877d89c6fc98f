package reconcile

import (
	"context"
	"encoding/json"
	"fmt"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/topology"
)

func newNamespace(ctx context.Context) string {
	ns, err := cp.NewNamespace(ctx, "fp")
	Expect(err).NotTo(HaveOccurred())
	return ns
}

func create(ctx context.Context, objs ...client.Object) {
	for _, o := range objs {
		Expect(k8s.Create(ctx, o)).To(Succeed(), "creating %T %s", o, o.GetName())
	}
}

// update re-reads obj, applies mutate and writes it, retrying on conflicts.
func update[T client.Object](ctx context.Context, obj T, mutate func(T)) {
	Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate(obj)
		return k8s.Update(ctx, obj)
	}).Should(Succeed())
}

func remove(ctx context.Context, obj client.Object) {
	Expect(client.IgnoreNotFound(k8s.Delete(ctx, obj))).To(Succeed())
}

// configMapOf is the generated ConfigMap of flag set fsNS/fsName in namespace ns.
func configMapOf(ns, fsNS, fsName string) client.ObjectKey {
	return client.ObjectKey{Namespace: ns, Name: topology.ConfigMapName(topology.FlagSetKey(fsNS, fsName))}
}

// flagContent returns the flagd JSON a generated ConfigMap holds for a flag set,
// or "" when the ConfigMap does not exist.
func flagContent(ctx context.Context, cm client.ObjectKey, fsNS, fsName string) func() string {
	return func() string {
		got := &corev1.ConfigMap{}
		if err := k8s.Get(ctx, cm, got); err != nil {
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "reading ConfigMap: %v", err)
			return ""
		}
		return got.Data[topology.ConfigMapDataKey(topology.FlagSetKey(fsNS, fsName))]
	}
}

// defaultVariantIn decodes the default variant of "new-checkout" from flagd JSON.
func defaultVariantIn(content string) string {
	if content == "" {
		return ""
	}
	var doc struct {
		Flags map[string]struct {
			DefaultVariant string `json:"defaultVariant"`
		} `json:"flags"`
	}
	Expect(json.Unmarshal([]byte(content), &doc)).To(Succeed())
	return doc.Flags["new-checkout"].DefaultVariant
}

func configMapExists(ctx context.Context, key client.ObjectKey) func() bool {
	return func() bool {
		err := k8s.Get(ctx, key, &corev1.ConfigMap{})
		Expect(client.IgnoreNotFound(err)).To(Succeed())
		return err == nil
	}
}

// sourceCondition returns "Status/Reason: message" of a source's condition.
func sourceCondition(ctx context.Context, ns, name, condType string) func() string {
	return func() string {
		s := &v1beta1.FeatureFlagSource{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
		return conditionString(s.Status.Conditions, condType, s.Generation)
	}
}

func flagSetCondition(ctx context.Context, ns, name, condType string) func() string {
	return func() string {
		ff := &v1beta1.FeatureFlag{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ff)).To(Succeed())
		return conditionString(ff.Status.Conditions, condType, ff.Generation)
	}
}

// conditionString renders a condition, or says it is missing or stale.
func conditionString(conds []metav1.Condition, condType string, generation int64) string {
	c := meta.FindStatusCondition(conds, condType)
	switch {
	case c == nil:
		return "missing"
	case c.ObservedGeneration != generation:
		return fmt.Sprintf("stale (generation %d, observed %d)", generation, c.ObservedGeneration)
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

func sourceStatus(ctx context.Context, ns, name string) func() v1beta1.FeatureFlagSourceStatus {
	return func() v1beta1.FeatureFlagSourceStatus {
		s := &v1beta1.FeatureFlagSource{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
		return s.Status
	}
}

func flagSetStatus(ctx context.Context, ns, name string) func() v1beta1.FeatureFlagStatus {
	return func() v1beta1.FeatureFlagStatus {
		ff := &v1beta1.FeatureFlag{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ff)).To(Succeed())
		return ff.Status
	}
}

const (
	statusTrue = "True/"
)

func objectKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

func objectMeta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name}
}

func newConfigMap() *corev1.ConfigMap { return &corev1.ConfigMap{} }

// warningReasons lists the reasons of the Warning events about an object.
func warningReasons(ctx context.Context, ns, name string) func() []string {
	return func() []string {
		var list eventsv1.EventList
		Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		var reasons []string
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Type == corev1.EventTypeWarning {
				reasons = append(reasons, e.Reason)
			}
		}
		return reasons
	}
}

// The objects of the specs, from the shared fixtures.
var (
	flagSet        = fixtures.FlagSet
	source         = fixtures.Source
	fileRef        = fixtures.FileRef
	targeting      = fixtures.Targeting
	withSelector   = fixtures.Selecting
	deployment     = fixtures.Deployment
	statefulSet    = fixtures.StatefulSet
	daemonSet      = fixtures.DaemonSet
	referenceGrant = fixtures.ReferenceGrant
)
