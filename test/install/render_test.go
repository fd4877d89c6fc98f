package install

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

// The kustomize components of config/components and the chart value that
// turns each on (hack/manifests generates them from those values).
var componentValues = []struct{ name, value string }{
	{"sync", "sync.enabled"},
	{"certmanager", "certManager.enabled"},
	{"servicemonitor", "serviceMonitor.enabled"},
	{"networkpolicy", "networkPolicy.enabled"},
}

// installMode is a base a user composes components with: its kustomization
// folder, and the namespace and chart values that render the same.
type installMode struct {
	name, dir, namespace string
	values               []string
}

var (
	clusterWide = installMode{name: "cluster-wide", dir: "config/default", namespace: systemNS}
	teamScoped  = installMode{name: "namespace-scoped", dir: "config/namespaced", namespace: teamNS,
		values: []string{"namespaced.enabled=true", "namespaced.clusterObjects=false"}}
)

// combination is a set of components, by their index in componentValues.
type combination uint

func (c combination) has(i int) bool { return c&(1<<i) != 0 }

func (c combination) String() string {
	var names []string
	for i, cv := range componentValues {
		if c.has(i) {
			names = append(names, cv.name)
		}
	}
	if len(names) == 0 {
		return "no component"
	}
	return strings.Join(names, "+")
}

// fullest has every component.
const fullest = combination(1<<4 - 1)

// combinationDir writes a kustomization that is mode's own with the
// components of c instead of its own, as a user composes them (docs/install.md,
// "Components"): a copy of the folder's kustomization and files, its paths made
// to point back into the repository. It returns the folder.
func combinationDir(mode installMode, c combination) string {
	GinkgoHelper()
	src := filepath.Join(rootDir, mode.dir)
	dst := GinkgoT().TempDir()
	entries, err := os.ReadDir(src)
	Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)).To(Succeed())
	}
	k := map[string]any{}
	b, err := os.ReadFile(filepath.Join(dst, "kustomization.yaml"))
	Expect(err).NotTo(HaveOccurred())
	Expect(yaml.Unmarshal(b, &k)).To(Succeed())
	var resources []any
	for _, r := range k["resources"].([]any) {
		r := r.(string)
		if _, err := os.Stat(filepath.Join(src, r)); err == nil && !strings.HasSuffix(r, ".yaml") {
			rel, err := filepath.Rel(dst, filepath.Join(src, r))
			Expect(err).NotTo(HaveOccurred())
			r = rel
		}
		resources = append(resources, r)
	}
	k["resources"] = resources
	var components []any
	for i, cv := range componentValues {
		if c.has(i) {
			rel, err := filepath.Rel(dst, filepath.Join(rootDir, "config", "components", cv.name))
			Expect(err).NotTo(HaveOccurred())
			components = append(components, rel)
		}
	}
	k["components"] = components
	b, err = yaml.Marshal(k)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(dst, "kustomization.yaml"), b, 0o644)).To(Succeed())
	return dst
}

// kustomizeBuild renders a kustomization with the suite's kubectl.
func kustomizeBuild(dir string) string {
	GinkgoHelper()
	return kubectl("kustomize", dir)
}

// helmPath is the helm that `make helm` builds.
func helmPath() string { return filepath.Join(rootDir, "bin", "helm") }

// helmTemplate renders the chart as release "flagplane" in namespace with
// the given values (key=value).
func helmTemplate(namespace string, values ...string) string {
	GinkgoHelper()
	args := []string{"template", "flagplane", filepath.Join(rootDir, "charts", "flagplane"), "--namespace", namespace}
	for _, v := range values {
		args = append(args, "--set", v)
	}
	out, err := exec.Command(helmPath(), args...).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "helm %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// helmValues are the values that render what mode with c renders.
func (mode installMode) helmValues(c combination) []string {
	values := slices.Clone(mode.values)
	for i, cv := range componentValues {
		values = append(values, fmt.Sprintf("%s=%t", cv.value, c.has(i)))
	}
	return values
}

// objects parses a multi-document render into objects keyed by
// kind/namespace/name.
func objects(render string) map[string]map[string]any {
	GinkgoHelper()
	out := map[string]map[string]any{}
	for _, part := range regexp.MustCompile(`(?m)^---\s*$`).Split(render, -1) {
		obj := map[string]any{}
		Expect(yaml.Unmarshal([]byte(part), &obj)).To(Succeed(), part)
		if len(obj) == 0 {
			continue
		}
		md, _ := obj["metadata"].(map[string]any)
		key := fmt.Sprintf("%v/%v/%v", obj["kind"], md["namespace"], md["name"])
		Expect(out).NotTo(HaveKey(key), "rendered twice")
		out[key] = obj
	}
	return out
}

// Labels and annotations only Helm puts on what it installs.
var helmOnly = []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/version",
	"helm.sh/chart", "helm.sh/resource-policy"}

// comparable is an object as both installs mean it: without what only Helm
// adds, the manager's arguments as a set (each component appends its own),
// and multi-line strings (CEL, descriptions) up to their whitespace, which
// kustomize's YAML writer re-folds.
func comparable(obj map[string]any) map[string]any {
	obj = normalized(obj).(map[string]any)
	md := obj["metadata"].(map[string]any)
	for _, field := range []string{"labels", "annotations"} {
		m, _ := md[field].(map[string]any)
		for _, k := range helmOnly {
			delete(m, k)
		}
		if m != nil && len(m) == 0 {
			delete(md, field)
		}
	}
	if obj["kind"] == "Deployment" {
		for _, c := range obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any) {
			c := c.(map[string]any)
			if args, ok := c["args"].([]any); ok {
				sort.Slice(args, func(i, j int) bool { return fmt.Sprint(args[i]) < fmt.Sprint(args[j]) })
			}
		}
	}
	return obj
}

func normalized(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = normalized(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normalized(e)
		}
		return out
	case string:
		if strings.Contains(v, "\n") {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return v
}

// describeCombinations renders every combination of the components with
// kustomize, on both bases, and checks each against the chart's render with
// the same values: they compose (no component undoes another's additions),
// and the kustomize install and the Helm install are one thing.
func describeCombinations() {
	var entries []TableEntry
	for _, mode := range []installMode{clusterWide, teamScoped} {
		for c := combination(0); c <= fullest; c++ {
			entries = append(entries, Entry(fmt.Sprintf("%s, %s", mode.name, c), mode, c))
		}
	}
	DescribeTable("renders with kustomize as the chart renders with the same values",
		func(mode installMode, c combination) {
			fromKustomize := objects(kustomizeBuild(combinationDir(mode, c)))
			fromHelm := objects(helmTemplate(mode.namespace, mode.helmValues(c)...))
			Expect(slices.Sorted(maps.Keys(fromKustomize))).To(Equal(slices.Sorted(maps.Keys(fromHelm))), "the same objects")
			for key, obj := range fromKustomize {
				Expect(comparable(obj)).To(Equal(comparable(fromHelm[key])), key)
			}
			// What each component adds is there, once.
			dep := fromKustomize["Deployment/"+mode.namespace+"/flagplane-manager"]
			Expect(dep).NotTo(BeNil())
			yamlDep, err := yaml.Marshal(dep)
			Expect(err).NotTo(HaveOccurred())
			for i, cv := range componentValues {
				marker := map[string]string{
					"sync": "--sync-bind-address=:8015", "certmanager": "--webhook-certificates=external",
				}[cv.name]
				if marker == "" {
					continue
				}
				if c.has(i) {
					Expect(strings.Count(string(yamlDep), marker)).To(Equal(1), cv.name)
				} else {
					Expect(string(yamlDep)).NotTo(ContainSubstring(marker), cv.name)
				}
			}
		},
		entries,
	)
}

// describeDefaultImage: out of the box, both installs run an image that a
// registry serves (the project's, tagged with the chart's appVersion), not
// a name that exists only where it was built.
func describeDefaultImage() {
	It("is the project's published image, tagged with the chart's appVersion", func() {
		b, err := os.ReadFile(filepath.Join(rootDir, "charts", "flagplane", "Chart.yaml"))
		Expect(err).NotTo(HaveOccurred())
		chart := map[string]any{}
		Expect(yaml.Unmarshal(b, &chart)).To(Succeed())
		appVersion, _ := chart["appVersion"].(string)
		Expect(appVersion).To(MatchRegexp(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`), "a release's version, which a registry can serve as a tag")
		want := "ghcr.io/flagplane/flagplane:" + appVersion
		for _, mode := range []installMode{clusterWide, teamScoped} {
			renders := map[string]string{
				"helm template":     helmTemplate(mode.namespace, mode.values...),
				"kubectl kustomize": kustomizeBuild(filepath.Join(rootDir, mode.dir)),
			}
			for tool, render := range renders {
				dep := objects(render)["Deployment/"+mode.namespace+"/flagplane-manager"]
				Expect(dep).NotTo(BeNil(), "%s, %s", mode.name, tool)
				var images []any
				for _, c := range dep["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any) {
					images = append(images, c.(map[string]any)["image"])
				}
				Expect(images).To(Equal([]any{want}), "%s, %s", mode.name, tool)
			}
		}
	})
}
