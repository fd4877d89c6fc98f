package flagd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/flagplane/flagplane/workflows/injection"
)

// The OpenFeature Operator's four Flagd scenarios (testdata/ofo, see its
// README): applied with kubectl as they are, asserted as chainsaw asserts.
var _ = Describe("the OpenFeature Operator's Flagd scenarios, in its manifest form", func() {
	for _, scenario := range []string{
		"flagd-with-custom-ports",
		"flagd-with-ingress-default-paths",
		"flagd-with-ingress-custom-paths",
		"flagd-with-gateway-api",
	} {
		It(scenario+" holds", func(ctx SpecContext) {
			ns := newNamespace(ctx, "ofo")
			dir := filepath.Join("testdata", "ofo", scenario)
			_, err := cp.Kubectl("apply", "-n", ns, "-f", filepath.Join(dir, "00-install.yaml"))
			Expect(err).NotTo(HaveOccurred())

			bindings := map[string]any{"namespace": ns, "flagdImage": injection.DefaultSidecarImage + ":" + injection.DefaultSidecarTag}
			for _, want := range assertDocs(filepath.Join(dir, "00-assert.yaml")) {
				want = bind(want, bindings).(map[string]any)
				u := &unstructured.Unstructured{Object: want}
				By(fmt.Sprintf("%s %s", u.GetKind(), u.GetName()))
				Eventually(func() (string, error) {
					got := &unstructured.Unstructured{}
					got.SetGroupVersionKind(schema.FromAPIVersionAndKind(u.GetAPIVersion(), u.GetKind()))
					if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: u.GetName()}, got); err != nil {
						return "", err
					}
					return assertMismatch(got.Object, want, ""), nil
				}).Should(BeEmpty(), "%s %s does not hold what the scenario asserts", u.GetKind(), u.GetName())
			}

			By("the flag, over the Service")
			Eventually(rpcVariantOf(ctx, ns, "flagd-sample", "simple-flag")).Should(Equal("on"))
		})
	}
})

// assertDocs reads the objects of a multi-document YAML file.
func assertDocs(path string) []map[string]any {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	var out []map[string]any
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var m map[string]any
		Expect(yaml.Unmarshal(doc, &m)).To(Succeed())
		out = append(out, m)
	}
	return out
}

// bind replaces the chainsaw bindings "($name)" of an assertion by their values.
func bind(v any, bindings map[string]any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = bind(e, bindings)
		}
	case []any:
		for i, e := range x {
			x[i] = bind(e, bindings)
		}
	case string:
		if name, ok := strings.CutPrefix(x, "($"); ok && strings.HasSuffix(name, ")") {
			if b, ok := bindings[strings.TrimSuffix(name, ")")]; ok {
				return b
			}
		}
	}
	return v
}

// assertMismatch says where got does not hold what want asserts, as chainsaw
// compares them: a map holds the keys listed, a list has the same length and
// holds each element at its index, a scalar is equal (numbers by value).
func assertMismatch(got, want any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: want an object, got %v", path, got)
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, ok := g[k]
			if !ok {
				return fmt.Sprintf("%s.%s: missing", path, k)
			}
			if m := assertMismatch(gv, w[k], path+"."+k); m != "" {
				return m
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: want %d elements, got %v", path, len(w), got)
		}
		for i := range w {
			if m := assertMismatch(g[i], w[i], fmt.Sprintf("%s[%d]", path, i)); m != "" {
				return m
			}
		}
		return ""
	}
	if fmt.Sprint(got) == fmt.Sprint(want) && (reflect.TypeOf(got) == reflect.TypeOf(want) || isNumber(got) && isNumber(want)) {
		return ""
	}
	return fmt.Sprintf("%s: want %v, got %v", path, want, got)
}

func isNumber(v any) bool {
	switch v.(type) {
	case int, int32, int64, float64:
		return true
	}
	return false
}
