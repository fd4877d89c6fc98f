package api

import (
	"encoding/json"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flagplanev1beta1 "github.com/flagplane/flagplane/api/v1beta1"
)

// statusCase drives the status-subresource spec for one kind.
type statusCase struct {
	object    func() client.Object    // a valid object without status
	setStatus func(obj client.Object) // gives it a status, as a controller would
	specField []string                // a spec field to change, and its new value
	specValue any
	shortName string            // what kubectl get accepts for the kind
	columns   map[string]string // the printer columns, with the status set
}

var _ = Describe("Status subresource and printer columns", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx, "status") })

	DescribeTable("status is written through /status only, and shown by kubectl get <short name>",
		func(ctx SpecContext, c statusCase) {
			obj := c.object()
			obj.SetNamespace(ns)
			Expect(k8s.Create(ctx, obj)).To(Succeed())
			Expect(obj.GetGeneration()).To(BeEquivalentTo(1))

			By("updating the status through /status")
			c.setStatus(obj)
			wantStatus := field(obj, "status")
			Expect(wantStatus).NotTo(BeEmpty())
			Expect(k8s.Status().Update(ctx, obj)).To(Succeed())
			stored := get(ctx, obj)
			Expect(normalize(stored.Object["status"])).To(Equal(normalize(wantStatus)))
			Expect(stored.GetGeneration()).To(BeEquivalentTo(1), "a status update is no new generation")

			By("updating the spec, with another status in the request")
			Expect(unstructured.SetNestedField(stored.Object, c.specValue, append([]string{"spec"}, c.specField...)...)).To(Succeed())
			Expect(unstructured.SetNestedField(stored.Object, int64(12345), "status", "observedGeneration")).To(Succeed())
			Expect(k8s.Update(ctx, stored)).To(Succeed())
			stored = get(ctx, obj)
			Expect(nested(stored, append([]string{"spec"}, c.specField...)...)).To(Equal(c.specValue))
			Expect(stored.GetGeneration()).To(BeEquivalentTo(2))
			Expect(normalize(stored.Object["status"])).To(Equal(normalize(wantStatus)), "the main resource must ignore status")

			By("updating the status, with another spec in the request")
			wantSpec := runtime.DeepCopyJSONValue(stored.Object["spec"])
			unstructured.RemoveNestedField(stored.Object, append([]string{"spec"}, c.specField...)...)
			Expect(unstructured.SetNestedField(stored.Object, int64(2), "status", "observedGeneration")).To(Succeed())
			Expect(k8s.Status().Update(ctx, stored)).To(Succeed())
			stored = get(ctx, obj)
			Expect(stored.Object["spec"]).To(Equal(wantSpec), "/status must ignore spec")
			Expect(nested(stored, "status", "observedGeneration")).To(BeEquivalentTo(2))

			By("kubectl get " + c.shortName)
			Expect(printerColumns(kubectl("get", c.shortName, obj.GetName(), "-n", ns))).To(Equal(c.columns))
		},
		Entry("FeatureFlag", statusCase{
			object: func() client.Object {
				return &flagplanev1beta1.FeatureFlag{
					ObjectMeta: metav1.ObjectMeta{Name: "checkout-flags"},
					Spec: flagplanev1beta1.FeatureFlagSpec{FlagSpec: flagplanev1beta1.FlagSpec{
						Flags: map[string]flagplanev1beta1.Flag{
							"new-checkout": boolFlag(), "dark-mode": boolFlag(), "one-click": boolFlag(),
						},
					}},
				}
			},
			setStatus: func(obj client.Object) {
				ff := obj.(*flagplanev1beta1.FeatureFlag)
				ff.Status = flagplanev1beta1.FeatureFlagStatus{
					ObservedGeneration: 1, Flags: 3, Sources: 1, Namespaces: []string{"shop"},
					Conditions: []metav1.Condition{condition(flagplanev1beta1.ConditionAccepted, flagplanev1beta1.ReasonAccepted)},
					Revision:   "6047d4b262a7", Delivered: "1/2",
					Consumers: []flagplanev1beta1.ConsumerRevision{
						{Kind: "ConfigMap", Namespace: "web", Name: "flagd.shop.checkout-flags", Revision: "0a1b2c3d4e5f"},
						{Kind: "ConfigMap", Namespace: "shop", Name: "flagd.shop.checkout-flags", Revision: "6047d4b262a7"},
					},
					Confirmed: "2/3",
					Serving: []flagplanev1beta1.NamespaceServing{
						{Namespace: "web", Revision: "6047d4b262a7", Pods: 2, Confirmed: 1, Others: []flagplanev1beta1.RevisionPods{{Revision: "0a1b2c3d4e5f", Pods: 1}},
							Reason: "pod web-1: flagd serves revision 0a1b2c3d4e5f"},
						{Namespace: "shop", Revision: "6047d4b262a7", Pods: 1, Confirmed: 1, Starting: 1},
					},
				}
			},
			specField: []string{"flagSpec", "flags", "new-checkout", "defaultVariant"}, specValue: "on",
			shortName: "ff",
			columns:   map[string]string{"NAME": "checkout-flags", "FLAGS": "3", "ACCEPTED": "True", "DELIVERED": "1/2", "CONFIRMED": "2/3"},
		}),
		Entry("FeatureFlagSource", statusCase{
			object: func() client.Object {
				ffs := sourceWith(1)
				ffs.Name = "checkout-sidecars"
				ffs.Spec.TargetRefs = []flagplanev1beta1.TargetRef{{Kind: "Deployment", Name: "checkout"}, {Kind: "StatefulSet", Name: "ledger"}}
				return ffs
			},
			setStatus: func(obj client.Object) {
				ffs := obj.(*flagplanev1beta1.FeatureFlagSource)
				ffs.Status = flagplanev1beta1.FeatureFlagSourceStatus{
					ObservedGeneration: 1, TargetCount: 2,
					Targets: []flagplanev1beta1.WorkloadReference{{Kind: "Deployment", Name: "checkout"}, {Kind: "StatefulSet", Name: "ledger"}},
					Conditions: []metav1.Condition{
						condition(flagplanev1beta1.ConditionAccepted, flagplanev1beta1.ReasonAccepted),
						condition(flagplanev1beta1.ConditionResolvedRefs, flagplanev1beta1.ReasonResolvedRefs),
						condition(flagplanev1beta1.ConditionProgrammed, flagplanev1beta1.ReasonProgrammed),
					},
				}
			},
			specField: []string{"port"}, specValue: int64(9000),
			shortName: "ffs",
			columns:   map[string]string{"NAME": "checkout-sidecars", "TARGETS": "2", "READY": "True"},
		}),
		Entry("InProcessConfiguration", statusCase{
			object: func() client.Object {
				return &flagplanev1beta1.InProcessConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "in-process"}}
			},
			setStatus: func(obj client.Object) {
				ipc := obj.(*flagplanev1beta1.InProcessConfiguration)
				ipc.Status = flagplanev1beta1.InProcessConfigurationStatus{
					ObservedGeneration: 1, TargetCount: 1,
					Targets:    []flagplanev1beta1.WorkloadReference{{Kind: "Deployment", Name: "checkout"}},
					Conditions: []metav1.Condition{condition(flagplanev1beta1.ConditionAccepted, flagplanev1beta1.ReasonAccepted)},
				}
			},
			specField: []string{"host"}, specValue: "flag-sync.flags.svc",
			shortName: "inprocessconfigurations",
			columns:   map[string]string{"NAME": "in-process", "TARGETS": "1", "ACCEPTED": "True"},
		}),
		Entry("Flagd", statusCase{
			object: func() client.Object {
				f := &flagplanev1beta1.Flagd{ObjectMeta: metav1.ObjectMeta{Name: "flagd-sample"}}
				f.Spec.FeatureFlagSource = "end-to-end"
				f.Spec.Replicas = ptr.To[int32](2)
				return f
			},
			setStatus: func(obj client.Object) {
				f := obj.(*flagplanev1beta1.Flagd)
				f.Status = flagplanev1beta1.FlagdStatus{
					ObservedGeneration: 1, Replicas: 2, ReadyReplicas: 1,
					Endpoints: []flagplanev1beta1.FlagdEndpoint{{API: "flagd", Kind: "Service", Host: "flagd-sample.shop.svc", Port: 8013}},
					Conditions: []metav1.Condition{
						condition(flagplanev1beta1.ConditionAccepted, flagplanev1beta1.ReasonAccepted),
						condition(flagplanev1beta1.ConditionProgrammed, flagplanev1beta1.ReasonProgrammed),
						condition(flagplanev1beta1.ConditionAvailable, flagplanev1beta1.ReasonAvailable),
					},
				}
			},
			specField: []string{"serviceType"}, specValue: "NodePort",
			shortName: "flagds",
			columns:   map[string]string{"NAME": "flagd-sample", "SOURCE": "end-to-end", "REPLICAS": "2", "READY": "1", "AVAILABLE": "True"},
		}),
	)
})

func boolFlag() flagplanev1beta1.Flag {
	return flagplanev1beta1.Flag{
		State:          flagplanev1beta1.FlagStateEnabled,
		Variants:       json.RawMessage(`{"on": true, "off": false}`),
		DefaultVariant: "off",
	}
}

func condition(typ, reason string) metav1.Condition {
	return metav1.Condition{
		Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: "set by the test",
		ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second)),
	}
}

// field returns a top-level field of a typed object in its JSON form.
func field(obj client.Object, name string) any {
	GinkgoHelper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	Expect(err).NotTo(HaveOccurred())
	return u[name]
}

// get reads obj back from the API server, as unstructured.
func get(ctx SpecContext, obj client.Object) *unstructured.Unstructured {
	GinkgoHelper()
	gvk, err := k8s.GroupVersionKindFor(obj)
	Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), u)).To(Succeed())
	return u
}

// nested returns the field at path, which must exist.
func nested(u *unstructured.Unstructured, path ...string) any {
	GinkgoHelper()
	v, found, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	Expect(err).NotTo(HaveOccurred())
	Expect(found).To(BeTrue(), "no field %v", path)
	return v
}

// printerColumns parses `kubectl get` table output of one object into
// column → value, leaving out AGE, which changes.
func printerColumns(table string) map[string]string {
	GinkgoHelper()
	lines := strings.Split(strings.TrimSpace(table), "\n")
	Expect(lines).To(HaveLen(2), "one header and one row in:\n%s", table)
	header, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	Expect(row).To(HaveLen(len(header)), "a value for each column in:\n%s", table)
	columns := map[string]string{}
	for i, name := range header {
		if name != "AGE" {
			columns[name] = row[i]
		}
	}
	return columns
}
