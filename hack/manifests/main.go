// Command manifests keeps config/ (kustomize) and charts/flagplane (Helm)
// one source: `make manifests` runs it after controller-gen.
//
// What has no knobs flows from config/ into the chart: the CRDs and the
// manager's RBAC rules (generated from the Go markers), the aggregated and
// metrics-reader ClusterRoles and the admission policy are copied into the
// chart's files/, which its templates read. What has knobs flows from the
// chart into config/: the manager's Deployment, Services, disruption
// budget, ServiceAccount, role bindings and webhook configurations are
// `helm template` renders of the chart with its defaults; each component of
// config/components is the difference that turning its value on makes to
// that render (new objects, and patches that compose: a strategic-merge
// patch per changed object, and JSON-patch appends for the manager's
// arguments, whose list has no merge key); config/namespaced and
// config/namespaced/admission are renders of the namespace-scoped mode for
// the example team "team-a".
//
// The CRD kustomizations' resources lists follow the CRDs controller-gen
// wrote (crds.go).
//
// Every file it writes says where it comes from; `make verify-generated`
// fails when they differ from what is committed.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// The chart's files/ that come from config/: destination -> source glob.
// kustomization.yaml files are not objects and are never copied.
var chartFiles = []struct{ dst, src string }{
	{"files/crds", "config/crd/bases/*.yaml"},
	{"files/rbac", "config/rbac/role.yaml"},
	{"files/rbac/aggregate", "config/rbac/aggregate/*.yaml"},
	{"files/rbac/metrics", "config/rbac/metrics/*.yaml"},
	{"files/policy", "config/policy/*.yaml"},
	{"files", "config/gitops/argocd/argocd-cm-health.yaml"},
}

// Where each template's render goes in config/, for the cluster-wide base
// (config/default's parts). Templates that render the files above are
// config's own already; any other template must be listed here.
var baseFiles = map[string]string{
	"namespace.yaml":       "config/manager/namespace.yaml",
	"deployment.yaml":      "config/manager/manager.yaml",
	"service-metrics.yaml": "config/manager/service.yaml",
	"pdb.yaml":             "config/manager/pdb.yaml",
	"serviceaccount.yaml":  "config/rbac/service_account.yaml",
	"rbac-bindings.yaml":   "config/rbac/role_binding.yaml",
	"webhooks.yaml":        "config/webhook/manifests.yaml",
	"service-webhook.yaml": "config/webhook/service.yaml",
}

// fromConfig are the templates that render config's own files.
var fromConfig = []string{"crds.yaml", "rbac-roles.yaml", "rbac-shared.yaml", "admission-policy.yaml"}

// The values every render of config/ is made with: no Helm labels, and every
// component off (config/default adds the sync component back).
var baseValues = []string{"helmLabels=false", "sync.enabled=false"}

// component is a kustomize component: the values that turn it on in the chart.
type component struct {
	name, doc string
	values    []string
}

var components = []component{
	{"sync", `The built-in flagd sync server (docs/sync-server.md): what makes
provider: flagd-proxy sources work. config/default includes it. Every
manager replica serves flagd.sync.v1 behind the Service flagplane-sync, the
webhook points flagd-proxy sidecars there, and their namespace tokens are
signed with the keys of the Secret flagplane-sync-keys, which the first
replica creates when it is absent (create it beforehand to bring your own).
Helm: sync.enabled.`, []string{"sync.enabled=true"}},
	{"certmanager", `Webhook certificates from cert-manager instead of the manager's own CA:
cert-manager issues the serving certificate into the Secret
flagplane-webhook-cert (a self-signed Issuer here), its CA injector fills
the caBundle of the webhook configurations, and the manager reads tls.crt
and tls.key from the mounted Secret (--webhook-certificates=external). The
namespace in the Certificate's DNS names and in the injection annotation
follows the install's (the replacements of config/default and
config/namespaced). Helm: certManager.enabled.`, []string{"certManager.enabled=true"}},
	{"servicemonitor", `A Prometheus Operator ServiceMonitor for the manager's /metrics (needs
the monitoring.coreos.com CRDs). Bind the ClusterRole
flagplane-metrics-reader to Prometheus' ServiceAccount. Helm:
serviceMonitor.enabled.`, []string{"serviceMonitor.enabled=true"}},
	{"networkpolicy", `A NetworkPolicy that admits traffic to the manager's Pods on the ports
they serve only (webhooks, metrics, probes, sync). Helm:
networkPolicy.enabled.`, []string{"networkPolicy.enabled=true"}},
}

// namespaceStrings are the replacements that make the strings naming the
// install's namespace follow it; config/default and config/namespaced
// (kustomize reads replacement files only below a kustomization) get a copy.
const namespaceStrings = `# Generated by ` + "`make manifests`" + ` (hack/manifests): edit it there.
#
# Strings that name the namespace flagplane is installed in, which
# kustomize's namespace transformer leaves alone, follow the webhook
# Service's namespace: the namespace the injector never sends, and the
# Certificate's DNS names and CA injection of config/components/certmanager.
# Replacements of the base, not of that component: a component's
# replacements run before its base's namespace transformer. Targets that do
# not exist (no cert-manager, no injector in config/namespaced) are skipped.
- source:
    kind: Service
    name: flagplane-webhook
    fieldPath: metadata.namespace
  targets:
  - select:
      kind: MutatingWebhookConfiguration
      name: flagplane-injector
    fieldPaths:
    - webhooks.[name=pods.flagplane.core.openfeature.dev].namespaceSelector.matchExpressions.[key=kubernetes.io/metadata.name].values.3
  - select:
      kind: Certificate
      name: flagplane-webhook
    fieldPaths:
    - spec.dnsNames.*
    options:
      delimiter: .
      index: 1
  - select:
      annotationSelector: cert-manager.io/inject-ca-from
    fieldPaths:
    - metadata.annotations.[cert-manager.io/inject-ca-from]
    options:
      delimiter: /
      index: 0
`

var namespaceStringsFiles = []string{"config/default/namespace-strings.yaml", "config/namespaced/namespace-strings.yaml"}

// The namespace-scoped renders, for the example team.
const exampleTeam = "team-a"

var (
	namespacedValues = []string{"namespaced.enabled=true", "namespaced.clusterObjects=false"}
	admissionValues  = []string{"namespaced.enabled=true", "namespaced.teamObjects=false",
		"crds.install=false", "admissionPolicy.enabled=false", "rbac.aggregatedRoles=false", "rbac.metricsReaderRole=false"}
)

func main() {
	root := flag.String("root", ".", "the repository")
	helm := flag.String("helm", "bin/helm", "the helm command")
	flag.Parse()
	g := &generator{root: *root, helm: *helm}
	if err := g.run(); err != nil {
		fmt.Fprintln(os.Stderr, "manifests:", err)
		os.Exit(1)
	}
}

type generator struct {
	root, helm string
}

const chartDir = "charts/flagplane"

func (g *generator) run() error {
	if err := g.syncCRDResources(); err != nil {
		return err
	}
	if err := g.copyChartFiles(); err != nil {
		return err
	}
	for _, f := range namespaceStringsFiles {
		if err := g.write(f, []byte(namespaceStrings)); err != nil {
			return err
		}
	}
	base, err := g.render("flagplane-system", baseValues...)
	if err != nil {
		return err
	}
	if err := g.writeBase(base); err != nil {
		return err
	}
	for _, c := range components {
		on, err := g.render("flagplane-system", append(slices.Clone(baseValues), c.values...)...)
		if err != nil {
			return err
		}
		if err := g.writeComponent(c, base, on); err != nil {
			return fmt.Errorf("component %s: %w", c.name, err)
		}
	}
	team, err := g.render(exampleTeam, append(slices.Clone(baseValues), namespacedValues...)...)
	if err != nil {
		return err
	}
	if err := g.writeRenders("config/namespaced", team); err != nil {
		return err
	}
	admission, err := g.render(exampleTeam, append(slices.Clone(baseValues), admissionValues...)...)
	if err != nil {
		return err
	}
	return g.writeRenders("config/namespaced/admission", admission)
}

// copyChartFiles replaces the chart's files/ with copies of config's.
func (g *generator) copyChartFiles() error {
	if err := os.RemoveAll(g.path(chartDir, "files")); err != nil {
		return err
	}
	for _, f := range chartFiles {
		srcs, err := filepath.Glob(g.path(f.src))
		if err != nil {
			return err
		}
		if len(srcs) == 0 {
			return fmt.Errorf("no file matches %s", f.src)
		}
		for _, src := range srcs {
			if filepath.Base(src) == "kustomization.yaml" {
				continue
			}
			b, err := os.ReadFile(src)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(g.root, src)
			if err != nil {
				return err
			}
			header := fmt.Sprintf("# Copied from %s by `make manifests`: edit it there.\n", filepath.ToSlash(rel))
			if err := g.write(filepath.Join(chartDir, f.dst, filepath.Base(src)), append([]byte(header), b...)); err != nil {
				return err
			}
		}
	}
	return nil
}

// doc is one object of a render: the template it came from, its text (with
// the template's comments) and its content.
type doc struct {
	template string
	text     string
	obj      map[string]any
}

func (d doc) key() string {
	md, _ := d.obj["metadata"].(map[string]any)
	return fmt.Sprintf("%v/%v/%v", d.obj["kind"], md["namespace"], md["name"])
}

var sourceLine = regexp.MustCompile(`^# Source: [^/]+/templates/(\S+)\n`)

// render runs helm template on the chart in namespace with values.
func (g *generator) render(namespace string, values ...string) ([]doc, error) {
	args := []string{"template", "flagplane", g.path(chartDir), "--namespace", namespace}
	for _, v := range values {
		args = append(args, "--set", v)
	}
	cmd := exec.Command(g.helm, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	var docs []doc
	for _, part := range regexp.MustCompile(`(?m)^---\n`).Split(string(out), -1) {
		m := sourceLine.FindStringSubmatch(part)
		if m == nil {
			if strings.TrimSpace(part) != "" {
				return nil, fmt.Errorf("a document without its template: %q", part)
			}
			continue
		}
		text := strings.TrimPrefix(part, m[0])
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(text), &obj); err != nil {
			return nil, fmt.Errorf("%s: %w", m[1], err)
		}
		if len(obj) == 0 {
			continue
		}
		docs = append(docs, doc{template: m[1], text: strings.TrimRight(text, "\n") + "\n", obj: obj})
	}
	return docs, nil
}

// writeBase writes the render of each template to its file of baseFiles.
func (g *generator) writeBase(docs []doc) error {
	byFile := map[string][]doc{}
	for _, d := range docs {
		if slices.Contains(fromConfig, d.template) {
			continue
		}
		file, ok := baseFiles[d.template]
		if !ok {
			return fmt.Errorf("templates/%s renders %s, and has no place in config/: add it to baseFiles", d.template, d.key())
		}
		byFile[file] = append(byFile[file], d)
	}
	for file, docs := range byFile {
		if err := g.write(file, joinDocs(header("templates/"+docs[0].template), docs)); err != nil {
			return err
		}
	}
	return nil
}

// writeRenders writes every document of a render into dir, a file per
// template (dir's kustomization.yaml lists them).
func (g *generator) writeRenders(dir string, docs []doc) error {
	if err := g.clean(dir); err != nil {
		return err
	}
	byTemplate := map[string][]doc{}
	for _, d := range docs {
		byTemplate[d.template] = append(byTemplate[d.template], d)
	}
	for tmpl, docs := range byTemplate {
		if err := g.write(filepath.Join(dir, tmpl), joinDocs(header("templates/"+tmpl), docs)); err != nil {
			return err
		}
	}
	return nil
}

// writeComponent writes config/components/<name>: the objects that turning
// the component on adds, and patches for the objects it changes.
func (g *generator) writeComponent(c component, base, on []doc) error {
	dir := filepath.Join("config/components", c.name)
	if err := g.clean(dir); err != nil {
		return err
	}
	old := map[string]doc{}
	for _, d := range base {
		old[d.key()] = d
	}
	var resources []string
	added := map[string][]doc{}
	type patch struct {
		file   string
		target map[string]any
	}
	var patches []patch
	for _, d := range on {
		b, ok := old[d.key()]
		delete(old, d.key())
		if !ok {
			added[d.template] = append(added[d.template], d)
			continue
		}
		if reflect.DeepEqual(b.obj, d.obj) {
			continue
		}
		smp, appends, err := diff(b.obj, d.obj)
		if err != nil {
			return fmt.Errorf("%s: %w", d.key(), err)
		}
		md := d.obj["metadata"].(map[string]any)
		target := map[string]any{"kind": d.obj["kind"], "name": md["name"]}
		stem := strings.ToLower(fmt.Sprint(d.obj["kind"])) + "-" + fmt.Sprint(md["name"])
		if len(smp) > 0 {
			smp["apiVersion"], smp["kind"] = d.obj["apiVersion"], d.obj["kind"]
			smp["metadata"] = mergeMaps(map[string]any{"name": md["name"]}, asMap(smp["metadata"]))
			b, err := yaml.Marshal(smp)
			if err != nil {
				return err
			}
			file := stem + ".patch.yaml"
			if err := g.write(filepath.Join(dir, file), append([]byte(header("templates/"+d.template)), b...)); err != nil {
				return err
			}
			patches = append(patches, patch{file, target})
		}
		if len(appends) > 0 {
			b, err := yaml.Marshal(appends)
			if err != nil {
				return err
			}
			file := stem + ".append.yaml"
			if err := g.write(filepath.Join(dir, file), append([]byte(header("templates/"+d.template)+
				"# Appended to the lists the object has, not merged: a strategic-merge patch\n# would replace a list without a merge key (args), and another component's\n# additions with it, and put new items of the others first.\n"), b...)); err != nil {
				return err
			}
			patches = append(patches, patch{file, target})
		}
	}
	for key := range old {
		return fmt.Errorf("turning it on removes %s: a component may only add", key)
	}
	for tmpl, docs := range added {
		if err := g.write(filepath.Join(dir, tmpl), joinDocs(header("templates/"+tmpl), docs)); err != nil {
			return err
		}
		resources = append(resources, tmpl)
	}
	sort.Strings(resources)
	k := map[string]any{"apiVersion": "kustomize.config.k8s.io/v1alpha1", "kind": "Component"}
	if len(resources) > 0 {
		k["resources"] = resources
	}
	if len(patches) > 0 {
		var ps []any
		for _, p := range patches {
			ps = append(ps, map[string]any{"path": p.file, "target": p.target})
		}
		k["patches"] = ps
	}
	b, err := yaml.Marshal(k)
	if err != nil {
		return err
	}
	var text strings.Builder
	for _, line := range strings.Split(c.doc, "\n") {
		text.WriteString("# " + line + "\n")
	}
	text.WriteString("#\n#   components: [../components/" + c.name + "]\n#\n")
	text.WriteString("# Generated by `make manifests` from charts/flagplane (values: " + strings.Join(c.values, ",") + "): edit the chart.\n")
	text.Write(b)
	return g.write(filepath.Join(dir, "kustomization.yaml"), []byte(text.String()))
}

// Merge keys of the lists a strategic-merge patch merges rather than replaces.
var mergeKeys = map[string]string{
	"containers": "name", "initContainers": "name", "volumes": "name", "env": "name",
	"volumeMounts": "mountPath", "ports": "name", "webhooks": "name",
}

// diff returns what on adds to base: a strategic-merge patch (nil when
// nothing is left for one), and JSON-patch appends for lists of scalars.
func diff(base, on map[string]any) (map[string]any, []any, error) {
	var appends []any
	smp, err := diffMap(base, on, "", &appends)
	return smp, appends, err
}

func diffMap(base, on map[string]any, path string, appends *[]any) (map[string]any, error) {
	out := map[string]any{}
	for k := range base {
		if _, ok := on[k]; !ok {
			return nil, fmt.Errorf("%s/%s is removed: a component may only add", path, k)
		}
	}
	// In key order, so that the appends are the same every time.
	for _, k := range slices.Sorted(maps.Keys(on)) {
		v := on[k]
		p := path + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
		bv, ok := base[k]
		if !ok {
			out[k] = v
			continue
		}
		if reflect.DeepEqual(bv, v) {
			continue
		}
		switch v := v.(type) {
		case map[string]any:
			bm, ok := bv.(map[string]any)
			if !ok {
				out[k] = v
				continue
			}
			sub, err := diffMap(bm, v, p, appends)
			if err != nil {
				return nil, err
			}
			if len(sub) > 0 {
				out[k] = sub
			}
		case []any:
			bl, _ := bv.([]any)
			sub, err := diffList(k, bl, v, p, appends)
			if err != nil {
				return nil, err
			}
			if sub != nil {
				out[k] = sub
			}
		default:
			out[k] = v
		}
	}
	return out, nil
}

// diffList: the items a list gains become appends, so that they keep the
// chart's order; items of a list with a merge key that change are merged by
// that key. A list the object does not have yet is merged whole (diffMap).
func diffList(field string, base, on []any, path string, appends *[]any) ([]any, error) {
	if key, ok := mergeKeys[field]; ok {
		byKey := map[any]map[string]any{}
		for _, b := range base {
			bm, ok := b.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: an item that is not an object", path)
			}
			byKey[bm[key]] = bm
		}
		var out []any
		for i, o := range on {
			om, ok := o.(map[string]any)
			if !ok || om[key] == nil {
				return nil, fmt.Errorf("%s: an item without %s", path, key)
			}
			bm, ok := byKey[om[key]]
			delete(byKey, om[key])
			if !ok {
				// A new item of a list the object has: appended, so that it
				// lands where the chart renders it (a strategic merge would
				// put it first).
				*appends = append(*appends, map[string]any{"op": "add", "path": path + "/-", "value": om})
				continue
			}
			if reflect.DeepEqual(bm, om) {
				continue
			}
			// Appends within an item address it by its index, which must
			// be the same in base and on.
			if i >= len(base) || !reflect.DeepEqual(base[i].(map[string]any)[key], om[key]) {
				return nil, fmt.Errorf("%s: items are reordered", path)
			}
			sub, err := diffMap(bm, om, fmt.Sprintf("%s/%d", path, i), appends)
			if err != nil {
				return nil, err
			}
			if len(sub) > 0 {
				sub[key] = om[key]
				out = append(out, sub)
			}
		}
		if len(byKey) > 0 {
			return nil, fmt.Errorf("%s: items are removed: a component may only add", path)
		}
		return out, nil
	}
	if len(on) < len(base) || !reflect.DeepEqual(on[:len(base)], base) {
		return nil, fmt.Errorf("%s: a list without a merge key changes other than at its end", path)
	}
	for _, v := range on[len(base):] {
		if _, ok := v.(map[string]any); ok {
			return nil, fmt.Errorf("%s: objects appended to a list without a merge key", path)
		}
		*appends = append(*appends, map[string]any{"op": "add", "path": path + "/-", "value": v})
	}
	return nil, nil
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func mergeMaps(a, b map[string]any) map[string]any {
	for k, v := range b {
		a[k] = v
	}
	return a
}

func header(source string) string {
	return "# Generated by `make manifests` from charts/flagplane/" + source + ": edit the template.\n"
}

func joinDocs(header string, docs []doc) []byte {
	var b strings.Builder
	b.WriteString(header)
	for i, d := range docs {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.WriteString(d.text)
	}
	return []byte(b.String())
}

// clean removes the generated files of dir (every file but subdirectories).
func (g *generator) clean(dir string) error {
	entries, err := os.ReadDir(g.path(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() || (e.Name() == "kustomization.yaml" || e.Name() == "namespace-strings.yaml") && !strings.HasPrefix(dir, "config/components") {
			continue
		}
		if err := os.Remove(g.path(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func (g *generator) path(elem ...string) string {
	return filepath.Join(append([]string{g.root}, elem...)...)
}

func (g *generator) write(rel string, b []byte) error {
	p := g.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, b, 0o644)
}
