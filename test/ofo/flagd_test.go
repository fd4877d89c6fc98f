package ofo

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The OpenFeature Operator's four scenarios of its Flagd kind, a standalone
// flagd that serves a FeatureFlagSource's flags over the network (test/flagd
// is that kind's own suite). One assertion differs on purpose: with custom
// ports, flagd's container declares the ports it listens on, and the
// Service targets them (see flagd-with-custom-ports/assert.yaml).

func init() { gatewayAPI = true }

var _ = DescribeTable("a standalone flagd (the Flagd kind)",
	func(ctx SpecContext, scenario string, replicas int, port int32) {
		ns := newNamespace(ctx)
		apply(ns, scenario, "install.yaml")

		By("what the scenario's assert file holds")
		for _, want := range asserts(scenario, ns) {
			Eventually(func() (*unstructured.Unstructured, error) { return stored(ctx, ns, want) }).
				Should(matchManifest(want), "%s %s", want.GetKind(), want.GetName())
		}

		By("beyond the scenario: every replica's flagd answers for simple-flag")
		// The assert file's objects can all be there while a replica's pod
		// is not yet (a busy run listed none): the pods are waited for.
		var pods corev1.PodList
		Eventually(func(g Gomega) {
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "flagd-sample"})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(replicas))
		}).Should(Succeed())
		for _, p := range pods.Items {
			Eventually(askFlagdOn(p, port)).Should(ContainSubstring(flagdAnswer), p.Name)
		}
	},
	Entry("flagd-with-custom-ports", "flagd-with-custom-ports", 1, int32(8888)),
	Entry("flagd-with-ingress-default-paths", "flagd-with-ingress-default-paths", 2, int32(8013)),
	Entry("flagd-with-ingress-custom-paths", "flagd-with-ingress-custom-paths", 2, int32(8013)),
	Entry("flagd-with-gateway-api", "flagd-with-gateway-api", 2, int32(8013)),
)

// asserts reads a scenario's assert file, with ${NAMESPACE} replaced by
// the spec's namespace and the scenario's flagd image by the one it expects
// of flagplane as installed here (flagdImage: another tag).
func asserts(scenario, ns string) []*unstructured.Unstructured {
	GinkgoHelper()
	data, err := os.ReadFile(testdata(scenario, "assert.yaml"))
	Expect(err).NotTo(HaveOccurred())
	Expect(string(data)).To(ContainSubstring(ofoFlagdImage), "the scenario's flagd image, in %s", scenario)
	data = []byte(strings.NewReplacer("${NAMESPACE}", ns, ofoFlagdImage, flagdImage).Replace(string(data)))
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		Expect(err).NotTo(HaveOccurred())
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}
