package gitops

import (
	"os"
	"path/filepath"
	"regexp"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/flagplane/flagplane/test/gitopshealth"
)

// updateTestdata is set (FLAGPLANE_UPDATE_HEALTH_TESTDATA=1, as `make
// health-testdata` runs the suite) to write the Argo CD health checks'
// testdata from the live objects the specs bring into each state: the
// first object of a kind in a state wins.
var updateTestdata = os.Getenv("FLAGPLANE_UPDATE_HEALTH_TESTDATA") == "1"

var (
	recordedMu sync.Mutex
	recorded   = map[string]bool{}
)

// testdataNames are the testdata files of each kstatus status.
var testdataNames = map[string]string{current: "healthy", inProgress: "progressing_reconciling", failed: "degraded_stalled"}

// randomSuffix is the suffix the control plane gives a spec's namespace.
var randomSuffix = regexp.MustCompile(`\b([a-z]+)-[a-z0-9]{5}\b`)

// recordTestdata writes u, as a GitOps tool reads it, to the testdata of
// its kind's health check for the status want, and the message Argo CD
// shows for it to the check's health_test.yaml. Namespaces lose their
// random suffix and times are fixed, so that a rerun changes nothing but
// what flagplane writes.
func recordTestdata(u *unstructured.Unstructured, want string, argo gitopshealth.Result) {
	GinkgoHelper()
	if !updateTestdata {
		return
	}
	gvk := u.GroupVersionKind()
	key := gvk.Kind + "/" + want
	recordedMu.Lock()
	defer recordedMu.Unlock()
	if recorded[key] {
		return
	}
	recorded[key] = true
	u = u.DeepCopy()
	for _, f := range []string{"managedFields", "uid", "resourceVersion", "creationTimestamp", "generateName"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		c.(map[string]any)["lastTransitionTime"] = "2026-01-01T00:00:00Z"
	}
	Expect(unstructured.SetNestedSlice(u.Object, conds, "status", "conditions")).To(Succeed())
	if consumers, ok, _ := unstructured.NestedSlice(u.Object, "status", "consumers"); ok {
		for _, c := range consumers {
			if _, ok := c.(map[string]any)["since"]; ok {
				c.(map[string]any)["since"] = "2026-01-01T00:00:00Z"
			}
		}
		Expect(unstructured.SetNestedSlice(u.Object, consumers, "status", "consumers")).To(Succeed())
	}
	b, err := yaml.Marshal(u.Object)
	Expect(err).NotTo(HaveOccurred())
	b = randomSuffix.ReplaceAll(b, []byte("$1"))

	root, err := gitopshealth.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	dir := filepath.Join(root, gitopshealth.ArgoCustomizationsDir, gvk.Group, gvk.Kind)
	name := testdataNames[want] + ".yaml"
	Expect(os.WriteFile(filepath.Join(dir, "testdata", name), b, 0o644)).To(Succeed())

	// The check's expected message for that file.
	testsPath := filepath.Join(dir, "health_test.yaml")
	raw, err := os.ReadFile(testsPath)
	Expect(err).NotTo(HaveOccurred())
	var tests struct {
		Tests []struct {
			HealthStatus struct {
				Status  string `json:"status"`
				Message string `json:"message"`
			} `json:"healthStatus"`
			InputPath string `json:"inputPath"`
		} `json:"tests"`
	}
	Expect(yaml.Unmarshal(raw, &tests)).To(Succeed())
	found := false
	for i := range tests.Tests {
		if tests.Tests[i].InputPath == "testdata/"+name {
			tests.Tests[i].HealthStatus.Status = argo.Status
			tests.Tests[i].HealthStatus.Message = string(randomSuffix.ReplaceAll([]byte(argo.Message), []byte("$1")))
			found = true
		}
	}
	Expect(found).To(BeTrue(), "%s lists no testdata/%s", testsPath, name)
	out, err := yaml.Marshal(tests)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(testsPath, out, 0o644)).To(Succeed())
}
