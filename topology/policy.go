package topology

import (
	"reflect"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
)

// A FeatureFlagSourcePolicy sets defaults and overrides for the sidecar
// settings of the workloads and Flagds of its namespace (api/policy/v1alpha1).
// In the graph it is a node of the source layer with no edge: what it
// governs is every consumer of a source in its namespace, found through
// the namespace indexes (wlByNs, flagdsByNs) when it changes, and, the
// other way, the policies of a consumer's namespace (policiesByNs) when
// the consumer changes. Keeping it off the edges keeps a policy edit from
// touching the edges of every workload of the namespace.
//
// What reads a policy: the injection of every workload of its namespace
// that a source targets, the container of every Flagd there, and the
// status of every policy of the namespace (which of them wins a setting,
// how many sidecars they govern).

// KindSourcePolicy is the node kind of a FeatureFlagSourcePolicy.
const KindSourcePolicy Kind = "FeatureFlagSourcePolicy"

// SourcePolicyKey is the key of a FeatureFlagSourcePolicy.
func SourcePolicyKey(namespace, name string) Key {
	return Key{Kind: KindSourcePolicy, Namespace: namespace, Name: name}
}

// SourcePolicyAccepted tells whether a policy applies at all
// (SourcePolicyProblems finds nothing).
func SourcePolicyAccepted(p *policyv1alpha1.FeatureFlagSourcePolicy) bool {
	return len(SourcePolicyProblems(p)) == 0
}

// FlagdSyncPort is the port flagd serves its own sync service on in a
// sidecar (flagplane leaves it at flagd's default): the ports a source or
// a policy sets must leave it free.
const FlagdSyncPort = 8015

// EnvVarPrefixPattern is what an env var prefix of a source or a policy
// must match: the names flagplane makes of it are valid env var names.
var EnvVarPrefixPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// SourcePolicyProblems says why a policy applies to nothing, or nothing
// when it applies. It must target the Namespace it lives in (the only
// target GEP-713 lets a namespaced policy reach in its own right), and its
// settings must be ones a sidecar can carry, as the FeatureFlagSource
// webhook requires of a source's: an env var prefix and env var names that
// make valid env var names, and ports apart from each other and from
// flagd's sync port. The schema cannot say all of that (a CEL rule over
// the env var names is past the API server's cost budget) and no webhook
// judges policies: a policy that fails here governs nothing, and its status
// says why, rather than have the API server refuse every injected pod of
// its namespace.
func SourcePolicyProblems(p *policyv1alpha1.FeatureFlagSourcePolicy) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if r := p.Spec.TargetRef; r.Group != "" || r.Kind != "Namespace" || r.Name != p.Namespace {
		errs = append(errs, field.Invalid(spec.Child("targetRef"), r.Kind+" "+r.Name,
			"a FeatureFlagSourcePolicy governs only the Namespace it lives in ("+p.Namespace+")"))
	}
	for _, b := range []struct {
		name  string
		block *policyv1alpha1.SourceSettingsBlock
	}{{"defaults", p.Spec.Defaults}, {"overrides", p.Spec.Overrides}} {
		if b.block != nil {
			errs = append(errs, settingsProblems(spec.Child(b.name), &b.block.SourceSettings)...)
		}
	}
	return errs
}

func settingsProblems(path *field.Path, s *policyv1alpha1.SourceSettings) field.ErrorList {
	var errs field.ErrorList
	ports := map[int32]string{}
	for _, pp := range []struct {
		name string
		v    int32
	}{{"port", s.Port}, {"managementPort", s.ManagementPort}, {"ofrepPort", s.OFREPPort}} {
		switch {
		case pp.v == 0:
		case pp.v == FlagdSyncPort:
			errs = append(errs, field.Invalid(path.Child(pp.name), pp.v, "flagd serves its sync service on 8015 in the sidecar"))
		case ports[pp.v] != "":
			errs = append(errs, field.Invalid(path.Child(pp.name), pp.v, "the same port as "+ports[pp.v]))
		default:
			ports[pp.v] = path.Child(pp.name).String()
		}
	}
	if s.EnvVarPrefix != "" && !EnvVarPrefixPattern.MatchString(s.EnvVarPrefix) {
		errs = append(errs, field.Invalid(path.Child("envVarPrefix"), s.EnvVarPrefix,
			"must be letters, digits and underscores, not starting with a digit"))
	}
	for i, e := range s.EnvVars {
		// A valid prefix and "_" before it, as every sidecar's env var has.
		for _, msg := range validation.IsEnvVarName("FLAGD_" + e.Name) {
			errs = append(errs, field.Invalid(path.Child("envVars").Index(i).Child("name"), e.Name, msg))
		}
	}
	return errs
}

// SourcePolicyChanged tells whether a policy update matters: its spec, its
// creation time (which orders the policies of a namespace), or a new UID.
func SourcePolicyChanged(old, new *policyv1alpha1.FeatureFlagSourcePolicy) bool {
	return old.UID != new.UID || !old.CreationTimestamp.Equal(&new.CreationTimestamp) ||
		!reflect.DeepEqual(old.Spec, new.Spec)
}

// UpsertSourcePolicy adds or updates a FeatureFlagSourcePolicy. The Delta,
// when it is new or changed (SourcePolicyChanged): every policy of its
// namespace (whose status may change), and every workload and Flagd of the
// namespace that a source serves (their sidecar settings). Metadata and
// status changes give an empty Delta.
//
// The topology keeps p: do not modify it afterwards.
func (t *Topology) UpsertSourcePolicy(p *policyv1alpha1.FeatureFlagSourcePolicy) (Delta, error) {
	return upsertObject(t, KindSourcePolicy, p, (*tx).upsertSourcePolicy)
}

// DeleteSourcePolicy removes a FeatureFlagSourcePolicy; the Delta is as
// for UpsertSourcePolicy.
func (t *Topology) DeleteSourcePolicy(namespace, name string) Delta {
	return deleteObject(t, Key{Kind: KindSourcePolicy, Namespace: namespace, Name: name}, (*tx).deleteSourcePolicy)
}

func (edit *tx) upsertSourcePolicy(k Key, p *policyv1alpha1.FeatureFlagSourcePolicy) error {
	if n, ok := edit.state.g.node(k); ok {
		old := n.payload.policy
		edit.state.g.setPayload(edit.owner, k, payload{policy: p})
		if SourcePolicyChanged(old, p) {
			edit.markNamespaceGoverned(k.Namespace, SourcePolicyAccepted(old) || SourcePolicyAccepted(p))
		}
		return nil
	}
	if err := edit.state.g.addNode(edit.owner, k, layerSource, payload{policy: p}); err != nil {
		return err
	}
	indexAdd(edit.owner, &edit.state.policiesByNs, nsKey(k.Namespace), k)
	edit.markNamespaceGoverned(k.Namespace, SourcePolicyAccepted(p))
	return nil
}

func (edit *tx) deleteSourcePolicy(k Key) error {
	n, ok := edit.state.g.node(k)
	if !ok {
		return nil
	}
	accepted := SourcePolicyAccepted(n.payload.policy)
	edit.state.g.removeNode(edit.owner, k)
	indexDel(edit.owner, &edit.state.policiesByNs, nsKey(k.Namespace), k)
	edit.mark(k)
	edit.markNamespaceGoverned(k.Namespace, accepted)
	return nil
}

// markNamespaceGoverned marks every policy of namespace (their statuses
// read each other) and, when consumers is true (an accepted policy
// changed), every consumer there that a source serves.
func (edit *tx) markNamespaceGoverned(namespace string, consumers bool) {
	edit.markAll(indexGet(edit.state.policiesByNs, nsKey(namespace)))
	if !consumers {
		return
	}
	edit.markAll(edit.state.governedSidecars(namespace))
}

// governedSidecars are the workloads and Flagds of namespace that a source
// serves: the sidecars its policies govern.
func (st *state) governedSidecars(namespace string) []Key {
	var out []Key
	for _, w := range indexGet(st.wlByNs, nsKey(namespace)) {
		if len(st.sourcesOfWorkload(w)) > 0 {
			out = append(out, w)
		}
	}
	for _, f := range indexGet(st.flagdsByNs, nsKey(namespace)) {
		if len(st.consumerSources(f)) > 0 {
			out = append(out, f)
		}
	}
	return out
}

// markPoliciesOfConsumers marks, at the end of an edit, the policies of the
// namespaces of every workload and Flagd whose desired state may have
// changed: a policy's status reads what it does to each of them.
func (edit *tx) markPoliciesOfConsumers() {
	if edit.state.policiesByNs.len() == 0 {
		return
	}
	seen := map[string]bool{}
	for _, w := range edit.delta.filter(func(k Key) bool { return k.Kind.IsWorkload() || k.Kind == KindFlagd }) {
		if seen[w.Namespace] {
			continue
		}
		seen[w.Namespace] = true
		edit.markAll(indexGet(edit.state.policiesByNs, nsKey(w.Namespace)))
	}
}

// SourcePolicy returns a FeatureFlagSourcePolicy of the graph.
func (v *View) SourcePolicy(k Key) (*policyv1alpha1.FeatureFlagSourcePolicy, bool) {
	n, ok := v.state.g.node(k)
	if !ok || n.payload.policy == nil {
		return nil, false
	}
	return n.payload.policy, true
}

// SourcePolicies lists every FeatureFlagSourcePolicy of the graph.
func (v *View) SourcePolicies() []Key { return v.state.g.ofKind(KindSourcePolicy) }

// SourcePoliciesOfNamespace lists the accepted policies of a namespace in
// the order they win: the oldest first (creation time, then name).
func (v *View) SourcePoliciesOfNamespace(namespace string) []*policyv1alpha1.FeatureFlagSourcePolicy {
	var out []*policyv1alpha1.FeatureFlagSourcePolicy
	for _, k := range indexGet(v.state.policiesByNs, nsKey(namespace)) {
		if p, ok := v.SourcePolicy(k); ok && SourcePolicyAccepted(p) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *policyv1alpha1.FeatureFlagSourcePolicy) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// GovernedBySourcePolicies lists the workloads and Flagds of namespace that
// a source serves: the sidecars its policies govern.
func (v *View) GovernedBySourcePolicies(namespace string) []Key {
	return sortedKeys(v.state.governedSidecars(namespace))
}
