package syncserver

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/configmaps"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/manifests"
	"github.com/flagplane/flagplane/workflows/status"
)

// BenchmarkFlagSetEdit is what one FeatureFlag edit costs the readers of
// its content, for a flag set consumed by 1, 10 and 100 namespaces: the
// topology's upsert, then what each reader computes from a snapshot taken
// after it, as the manager's workflows do: the ConfigMap workflow's desired
// ConfigMap in every consuming namespace, the status workflow's status of
// the FeatureFlag (from a copy of the object, as the updater reads it from
// the cache; the cache holds none of its ConfigMaps yet) and the content
// the sync server serves. Every edit is new content (the flag set's
// metadata counts the edits), as a user's edits are.
//
// Each size runs twice: owner=graph is flagplane's way, every reader
// takes the one rendering the topology made of the edit
// (topology.Rendered); owner=each-reader is the baseline in the same run,
// the way before issue 27: every reader renders, validates and hashes the
// edit itself (Validator.Rendering, once per consuming namespace, once for
// the status, once for the sync server), without the verdict cache that
// then spared some of it. docs/benchmarks.md has the ratios, and those
// measured against the code before the change.
//
//	go test ./syncserver -run '^$' -bench FlagSetEdit -benchmem
func BenchmarkFlagSetEdit(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		for _, eachReader := range []bool{false, true} {
			owner := map[bool]string{false: "graph", true: "each-reader"}[eachReader]
			b.Run(fmt.Sprintf("namespaces=%d/owner=%s", n, owner), func(b *testing.B) { benchFlagSetEdit(b, n, eachReader) })
		}
	}
}

func benchFlagSetEdit(b *testing.B, namespaces int, eachReader bool) {
	val := flagsets.NewValidator(false)
	settings := workflows.DefaultSettings()
	settings.FlagSets = val // one Validator for everything, as the manager has
	topo := topology.New(val.TopologyOptions()...)
	if err := manifests.Load(topo, strings.NewReader(editBenchManifests(namespaces))); err != nil {
		b.Fatal(err)
	}
	key := topology.FlagSetKey("flags", "catalog")
	v := topo.Snapshot()
	base, ok := v.FlagSet(key)
	if !ok || !v.FlagSetValid(key) {
		b.Fatal("the flag set is not in the graph, or not valid")
	}
	if got := len(v.ConsumerNamespaces(key)); got != namespaces {
		b.Fatalf("the flag set has %d consuming namespaces, want %d", got, namespaces)
	}

	b.ReportAllocs()
	edit := 0
	for b.Loop() {
		b.StopTimer()
		edit++
		ff := base.DeepCopy()
		ff.Spec.FlagSpec.Metadata = json.RawMessage(fmt.Sprintf(`{"edit":%d}`, edit))
		cached := ff.DeepCopy()
		b.StartTimer()

		if _, err := topo.UpsertFlagSet(ff); err != nil {
			b.Fatal(err)
		}
		v := topo.Snapshot()
		// The baseline's readers each render the edit for themselves.
		rerender := func() {
			if eachReader {
				if r := val.Rendering(cached); r.Err != nil || r.Revision == "" {
					b.Fatalf("rendering: %v", r.Err)
				}
			}
		}
		for _, ns := range v.ConsumerNamespaces(key) {
			rerender()
			cm, err := configmaps.Desired(v, topology.ConfigMapKey(key, ns), settings)
			if err != nil || cm == nil {
				b.Fatalf("ConfigMap in %s: %v, %v", ns, cm, err)
			}
		}
		rerender()
		if st := status.DesiredFlagSet(v, cached, noConfigMaps{}); st.Revision == "" {
			b.Fatal("no revision in the status")
		}
		rerender()
		if _, _, _, ok := served(v, key); !ok {
			b.Fatal("the sync server does not serve the edit")
		}
	}
}

// editBenchManifests: the flag set flags/catalog (20 flags, half of them
// targeted through two shared evaluators), read with the file provider by
// a source in each of n namespaces that targets the Deployment web there,
// which a ReferenceGrant in flags permits.
func editBenchManifests(n int) string {
	flags := map[string]any{}
	for i := range 20 {
		f := map[string]any{"state": "ENABLED", "variants": map[string]any{"on": true, "off": false}, "defaultVariant": "off"}
		if i%2 == 0 {
			f["targeting"] = map[string]any{"if": []any{map[string]any{"$ref": []string{"staff", "beta"}[i%4/2]}, "on", "off"}}
		}
		flags[fmt.Sprintf("flag-%02d", i)] = f
	}
	spec, _ := json.Marshal(map[string]any{
		"flags": flags,
		"$evaluators": map[string]any{
			"staff": map[string]any{"ends_with": []any{map[string]any{"var": "email"}, "@example.com"}},
			"beta":  map[string]any{"in": []any{map[string]any{"var": "country"}, []string{"nl", "se", "ca"}}},
		},
	})
	var b strings.Builder
	fmt.Fprintf(&b, "---\napiVersion: core.openfeature.dev/v1beta1\nkind: FeatureFlag\nmetadata: {namespace: flags, name: catalog, uid: catalog}\nspec: {flagSpec: %s}\n", spec)
	fmt.Fprintf(&b, "---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {namespace: flags, name: readers}\nspec:\n  to: [{group: core.openfeature.dev, kind: FeatureFlag, name: catalog}]\n  from:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {group: core.openfeature.dev, kind: FeatureFlagSource, namespace: app-%d}\n", i)
	}
	for i := range n {
		fmt.Fprintf(&b, "---\napiVersion: core.openfeature.dev/v1beta1\nkind: FeatureFlagSource\nmetadata: {namespace: app-%d, name: flags}\n"+
			"spec: {sources: [{source: flags/catalog, provider: file}], targetRefs: [{group: apps, kind: Deployment, name: web}]}\n", i)
		fmt.Fprintf(&b, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {namespace: app-%d, name: web}\n"+
			"spec: {selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}, spec: {containers: [{name: app, image: app}]}}}\n", i)
	}
	return b.String()
}

// noConfigMaps is a cache that holds none of the generated objects yet.
type noConfigMaps struct{}

func (noConfigMaps) ConfigMapData(string, string) (map[string]string, bool) { return nil, false }
func (noConfigMaps) Role(string, string) *rbacv1.Role                       { return nil }
func (noConfigMaps) RoleBinding(string, string) *rbacv1.RoleBinding         { return nil }
func (noConfigMaps) WriteFailure(string, string, string) workflows.Failure {
	return workflows.Failure{}
}

var _ status.Observed = noConfigMaps{}
