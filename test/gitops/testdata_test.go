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

// podOfReplicaSet is the name of a Deployment's pod: its ReplicaSet's
// template hash and a random suffix, both in the API machinery's alphabet
// without vowels (rand.SafeEncodeString).
var podOfReplicaSet = regexp.MustCompile(`\b([a-z][a-z0-9-]*?)-[bcdfghjklmnpqrstvwxz2456789]{6,10}-[bcdfghjklmnpqrstvwxz2456789]{5}\b`)

// timestamp is a time as the API and flagplane's messages write it.
var timestamp = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z\b`)

// stable takes out of recorded text what differs from run to run: the
// namespaces' random suffixes, pod names and times.
func stable(b []byte) []byte {
	b = podOfReplicaSet.ReplaceAll(b, []byte("$1-pod"))
	b = randomSuffix.ReplaceAll(b, []byte("$1"))
	return timestamp.ReplaceAll(b, []byte("2026-01-01T00:00:00Z"))
}

// recordTestdata writes u, as a GitOps tool reads it, to
// testdata/<name>.yaml of its kind's health check, and the status and
// message Argo CD shows for it to the check's health_test.yaml, which
// must list that file. Namespaces lose their random suffix, pods their
// generated names, and times are fixed, so that a rerun changes nothing but
// what flagplane writes.
func recordTestdata(u *unstructured.Unstructured, name string, argo gitopshealth.Result) {
	GinkgoHelper()
	if !updateTestdata || name == "" {
		return
	}
	gvk := u.GroupVersionKind()
	key := gvk.Kind + "/" + name
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
	b, err := yaml.Marshal(u.Object)
	Expect(err).NotTo(HaveOccurred())
	// Marshalled again once stable, so that lines wrap as for the text
	// that stays.
	var content map[string]any
	Expect(yaml.Unmarshal(stable(b), &content)).To(Succeed())
	b, err = yaml.Marshal(content)
	Expect(err).NotTo(HaveOccurred())

	root, err := gitopshealth.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	dir := filepath.Join(root, gitopshealth.ArgoCustomizationsDir, gvk.Group, gvk.Kind)
	name += ".yaml"
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
			tests.Tests[i].HealthStatus.Message = string(stable([]byte(argo.Message)))
			found = true
		}
	}
	Expect(found).To(BeTrue(), "%s lists no testdata/%s", testsPath, name)
	out, err := yaml.Marshal(tests)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(testsPath, out, 0o644)).To(Succeed())
}
