// Package explain answers "why" from the topology: for a workload, every
// source that applies to it and why (targetRefs, selector, annotation), the
// flag sets it gets and by which provider, every reference that does not
// resolve and why, the sidecar settings that one source lost to another,
// and those the namespace's FeatureFlagSourcePolicies decided (defaults
// and overrides) or could not; for a FeatureFlag, a FeatureFlagSource, an
// InProcessConfiguration or a FeatureFlagSourcePolicy, everything it
// reaches; for a FeatureFlag also the revision it serves and whether flagd
// can load it, from the graph's rendering of it, and how far its last
// edit got, from its status.
//
// It reads a topology.View and computes nothing the manager does not: the
// same graph (built from a cluster with the caller's permissions, or
// offline from manifests), the same tenancy rule, the same injection merge.
// It makes no API call of its own.
package explain

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/status"
)

// Report is the explanation of one object.
type Report struct {
	// Object is "<kind> <namespace>/<name>".
	Object string `json:"object"`

	// A workload's.
	Sources          []AppliedSource `json:"sources,omitempty"`
	InProcessConfigs []string        `json:"inProcessConfigurations,omitempty"`
	FlagSets         []Delivery      `json:"flagSets,omitempty"`
	Unresolved       []string        `json:"unresolved,omitempty"`
	Sidecar          *Sidecar        `json:"sidecar,omitempty"`
	// Settings are the sidecar settings a source or a policy sets, each
	// with what it comes from (the rest are the operator's defaults);
	// Overridden the values other sources set for them and lost.
	Settings   []string `json:"settings,omitempty"`
	Overridden []string `json:"overridden,omitempty"`
	// Policies are the sidecar settings the FeatureFlagSourcePolicies of
	// its namespace decided (defaults and overrides), PolicyNotes what of
	// them did not apply and why.
	Policies    []string `json:"policies,omitempty"`
	PolicyNotes []string `json:"policyNotes,omitempty"`

	// A FeatureFlag's, a source's or an in-process configuration's.
	Reaches *Reach `json:"reaches,omitempty"`
	// Served is what a FeatureFlag serves now, as the graph rendered it.
	Served *Served `json:"served,omitempty"`
	// Delivered is a FeatureFlag's delivery status, as the operator last
	// wrote it: absent offline (manifests have no status).
	Delivered *Delivered `json:"delivered,omitempty"`
}

// Served is what a flag set serves now: the graph's rendering of its spec,
// which its ConfigMaps, the sync server and its status read too.
type Served struct {
	// Revision is the content hash of its flagd document, as its status
	// and its consumers' revisions name it.
	Revision string `json:"revision"`
	// Invalid says why flagd cannot load it: its consumers keep its last
	// valid content.
	Invalid string `json:"invalid,omitempty"`
	// Warnings are what flagd loads but is probably a mistake (not served
	// when the manager validates strictly).
	Warnings []string `json:"warnings,omitempty"`
}

// servedOf reads a flag set's rendering from the graph; nil from a graph
// that renders no flag set.
func servedOf(v *topology.View, k topology.Key) *Served {
	r, ok := v.FlagSetRendered(k)
	if !ok || (r.Revision == "" && r.Err == nil) {
		return nil
	}
	s := &Served{Revision: r.Revision, Warnings: r.Warnings}
	if r.Err != nil {
		s.Invalid = r.Err.Error()
	}
	return s
}

// Delivered is whether a flag set's last edit has arrived, from its status.
type Delivered struct {
	Revision string `json:"revision"`
	// Count is status.delivered: "<up to date>/<all>" observed consumers.
	Count string `json:"count,omitempty"`
	// Consumers are the observed consumers, those behind first, each with
	// the revision it holds and since when.
	Consumers []string `json:"consumers,omitempty"`
	// Unobserved says which consumers are not counted, and why.
	Unobserved string `json:"unobserved,omitempty"`
	// Confirmed is status.confirmed: "<confirmed>/<pods>" whose flagd
	// answers with the revision planned for them; Serving, per namespace,
	// how many pods serve which revision, as their flagd answers.
	Confirmed string   `json:"confirmed,omitempty"`
	Serving   []string `json:"serving,omitempty"`
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// deliveredOf reads a FeatureFlag's delivery status; nil before the
// operator wrote one.
func deliveredOf(ff *v1beta1.FeatureFlag) *Delivered {
	st := ff.Status
	if st.Revision == "" {
		return nil
	}
	d := &Delivered{Revision: st.Revision, Count: st.Delivered}
	for _, c := range st.Consumers {
		line := c.Kind + " " + c.Namespace + "/" + c.Name + ": "
		switch c.Revision {
		case "":
			line += "holds nothing yet"
		case st.Revision:
			line += "holds " + c.Revision
		default:
			line += "behind, holds " + c.Revision
		}
		if c.Since != nil {
			line += " since " + c.Since.UTC().Format(time.RFC3339)
		}
		if c.Kind == status.KindSyncSubscribers {
			line += fmt.Sprintf(" (%d of %d streams current)", c.Current, c.Streams)
		}
		d.Consumers = append(d.Consumers, line)
	}
	d.Confirmed = st.Confirmed
	for _, ns := range st.Serving {
		d.Serving = append(d.Serving, ServingLine(ns))
	}
	if u := st.Unobserved; u != nil {
		who := count(int(u.Workloads), "workload") + " and " + count(int(u.Flagds), "Flagd")
		if u.InProcess > 0 {
			who = fmt.Sprintf("%s, %s and %s", count(int(u.Workloads), "workload"), count(int(u.Flagds), "Flagd"), count(int(u.InProcess), "in-process workload"))
		}
		d.Unobserved = fmt.Sprintf("%s not counted: %s", who, u.Reason)
	}
	return d
}

// ServingLine says what the pods of one namespace serve, from a
// FeatureFlag's status.serving: "ns: 2 of 3 pods serve abcd1234 (its copy
// since ...); 1 serve 5678abcd; pod x: why".
func ServingLine(ns v1beta1.NamespaceServing) string {
	line := fmt.Sprintf("%s: %d of %s serve %s", ns.Namespace, ns.Confirmed, count(int(ns.Pods), "pod"), topology.ShortRevision(ns.Revision))
	if ns.Since != nil {
		line += " (its copy since " + ns.Since.UTC().Format(time.RFC3339) + ")"
	}
	for _, o := range ns.Others {
		if o.Revision == "" {
			line += fmt.Sprintf("; %d not known", o.Pods)
		} else {
			line += fmt.Sprintf("; %d serve %s", o.Pods, topology.ShortRevision(o.Revision))
		}
	}
	if ns.Starting > 0 {
		line += fmt.Sprintf("; %s starting", count(int(ns.Starting), "pod"))
	}
	if ns.NotAsked > 0 {
		line += fmt.Sprintf("; %s not asked", count(int(ns.NotAsked), "pod"))
	}
	if ns.Reason != "" {
		line += "; " + ns.Reason
	}
	return line
}

// AppliedSource is a source that applies to a workload and why.
type AppliedSource struct {
	Source string   `json:"source"`
	Why    []string `json:"why"`
}

// Delivery is a flag set a workload gets, through which source and how.
type Delivery struct {
	FlagSet  string `json:"flagSet"`
	Source   string `json:"source"`
	Provider string `json:"provider"`
	// ConfigMap is the generated ConfigMap the sidecar mounts (file).
	ConfigMap string `json:"configMap,omitempty"`
}

// Sidecar is the flagd container the workload's pods get.
type Sidecar struct {
	Image string   `json:"image"`
	Args  []string `json:"args"`
	// Volumes are the generated ConfigMaps it mounts.
	Volumes []string `json:"volumes,omitempty"`
	// Note says what the computation assumed.
	Note string `json:"note"`
}

// Reach is what a flag set, source or in-process configuration reaches.
type Reach struct {
	Sources    []string `json:"sources,omitempty"`
	FlagSets   []string `json:"flagSets,omitempty"`
	Workloads  []string `json:"workloads,omitempty"`
	Flagds     []string `json:"flagds,omitempty"`
	Namespaces []string `json:"namespaces,omitempty"`
	ConfigMaps []string `json:"configMaps,omitempty"`
	// Denied are referrers of other namespaces that no ReferenceGrant permits.
	Denied []string `json:"denied,omitempty"`
	// Unresolved are the source's flag-set references that do not resolve.
	Unresolved []string `json:"unresolved,omitempty"`
}

// ErrNotFound is returned for an object the graph does not hold.
type ErrNotFound struct {
	Object string
	// Elsewhere are the namespaces whose object of that kind and name the
	// graph holds, when the namespace asked for is the wrong one.
	Elsewhere []string
}

func (e ErrNotFound) Error() string {
	msg := e.Object + " is not in the graph (it does not exist, or you may not list it)"
	switch len(e.Elsewhere) {
	case 0:
		return msg
	case 1:
		return msg + "; there is one in namespace " + e.Elsewhere[0] + ": give -n " + e.Elsewhere[0]
	}
	return msg + "; there are some in namespaces " + strings.Join(e.Elsewhere, ", ") + ": give -n NAMESPACE"
}

// Kind is a kind Explain takes, under its names as kubectl spells them.
type Kind struct {
	Name, Plural, Short string
	Kind                topology.Kind
}

// Kinds are the kinds Explain takes.
var Kinds = []Kind{
	{"deployment", "deployments", "deploy", topology.KindDeployment},
	{"statefulset", "statefulsets", "sts", topology.KindStatefulSet},
	{"daemonset", "daemonsets", "ds", topology.KindDaemonSet},
	{"featureflag", "featureflags", "ff", topology.KindFlagSet},
	{"featureflagsource", "featureflagsources", "ffs", topology.KindSource},
	{"inprocessconfiguration", "inprocessconfigurations", "ipc", topology.KindInProcessConfig},
	{"featureflagsourcepolicy", "featureflagsourcepolicies", "ffsp", topology.KindSourcePolicy},
}

// LookupKind finds the kind named kind (name, plural or short name, in any case).
func LookupKind(kind string) (Kind, error) {
	lower := strings.ToLower(kind)
	for _, k := range Kinds {
		if lower == k.Name || lower == k.Plural || lower == k.Short {
			return k, nil
		}
	}
	return Kind{}, fmt.Errorf("cannot explain kind %q: use deployment, statefulset, daemonset, featureflag, featureflagsource, inprocessconfiguration or featureflagsourcepolicy", kind)
}

// Objects lists the graph's objects of kind k, sorted.
func Objects(v *topology.View, k topology.Kind) []topology.Key {
	var keys []topology.Key
	switch k {
	case topology.KindFlagSet:
		keys = v.FlagSets()
	case topology.KindSource:
		keys = v.Sources()
	case topology.KindInProcessConfig:
		keys = v.InProcessConfigs()
	case topology.KindSourcePolicy:
		keys = v.SourcePolicies()
	default:
		for _, w := range v.Workloads() {
			if w.Kind == k {
				keys = append(keys, w)
			}
		}
	}
	slices.SortFunc(keys, func(a, b topology.Key) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return keys
}

// notFound is ErrNotFound for k, naming the namespaces where the graph
// holds an object of k's kind and name.
func notFound(v *topology.View, k topology.Key, object string) ErrNotFound {
	e := ErrNotFound{Object: object}
	for _, o := range Objects(v, k.Kind) {
		if o.Name == k.Name && o.Namespace != k.Namespace {
			e.Elsewhere = append(e.Elsewhere, o.Namespace)
		}
	}
	return e
}

// Explain explains the object of kind (deployment, statefulset, daemonset,
// featureflag, featureflagsource, inprocessconfiguration,
// featureflagsourcepolicy; short names deploy, sts, ds, ff, ffs, ipc,
// ffsp) namespace/name. opts are the injection options the sidecar is
// computed with.
func Explain(v *topology.View, kind, namespace, name string, opts injection.Options) (*Report, error) {
	k, err := keyOf(kind, namespace, name)
	if err != nil {
		return nil, err
	}
	r := &Report{Object: describe(k)}
	switch k.Kind {
	case topology.KindDeployment, topology.KindStatefulSet, topology.KindDaemonSet:
		if _, ok := v.Workload(k); !ok {
			return nil, notFound(v, k, r.Object)
		}
		explainWorkload(v, k, opts, r)
	case topology.KindFlagSet:
		ff, ok := v.FlagSet(k)
		if !ok {
			return nil, notFound(v, k, r.Object)
		}
		r.Reaches = flagSetReach(v, k)
		r.Served = servedOf(v, k)
		r.Delivered = deliveredOf(ff)
	case topology.KindSource:
		if _, ok := v.Source(k); !ok {
			return nil, notFound(v, k, r.Object)
		}
		r.Reaches = sourceReach(v, k)
	case topology.KindInProcessConfig:
		if _, ok := v.InProcessConfig(k); !ok {
			return nil, notFound(v, k, r.Object)
		}
		r.Reaches = &Reach{Workloads: names(v.WorkloadsOfInProcessConfig(k)), Denied: names(v.DeniedReferrers(k))}
	case topology.KindSourcePolicy:
		if _, ok := v.SourcePolicy(k); !ok {
			return nil, notFound(v, k, r.Object)
		}
		r.Reaches = policyReach(v, k)
	}
	return r, nil
}

func keyOf(kind, namespace, name string) (topology.Key, error) {
	k, err := LookupKind(kind)
	if err != nil {
		return topology.Key{}, err
	}
	switch k.Kind {
	case topology.KindFlagSet:
		return topology.FlagSetKey(namespace, name), nil
	case topology.KindSource:
		return topology.SourceKey(namespace, name), nil
	case topology.KindInProcessConfig:
		return topology.InProcessConfigKey(namespace, name), nil
	case topology.KindSourcePolicy:
		return topology.SourcePolicyKey(namespace, name), nil
	}
	return topology.WorkloadKey(k.Kind, namespace, name), nil
}

func explainWorkload(v *topology.View, w topology.Key, opts injection.Options, r *Report) {
	wl, _ := v.Workload(w)
	annotated := map[topology.Key]topology.RefState{}
	for _, ref := range v.AnnotationRefs(w) {
		annotated[ref.Target] = ref.State
		if ref.State == topology.RefResolved {
			continue
		}
		what := "FeatureFlagSource"
		if ref.Target.Kind == topology.KindInProcessConfig {
			what = "InProcessConfiguration"
		}
		switch ref.State {
		case topology.RefNotPermitted:
			r.Unresolved = append(r.Unresolved, fmt.Sprintf("the pod annotation names %s %s: no ReferenceGrant in %s permits %s's Pods (or %ss) to refer to it",
				what, ref.Target.Namespace+"/"+ref.Target.Name, ref.Target.Namespace, w.Namespace, w.Kind))
		default:
			r.Unresolved = append(r.Unresolved, fmt.Sprintf("the pod annotation names %s %s, which does not exist",
				what, ref.Target.Namespace+"/"+ref.Target.Name))
		}
	}
	for _, s := range v.SourcesOfWorkload(w) {
		src, _ := v.Source(s)
		applied := AppliedSource{Source: s.Namespace + "/" + s.Name}
		if src != nil && src.Namespace == w.Namespace {
			for _, t := range src.Spec.TargetRefs {
				if t.Kind == string(w.Kind) && t.Name == w.Name {
					applied.Why = append(applied.Why, fmt.Sprintf("its targetRefs name %s %s", t.Kind, t.Name))
				}
			}
			if src.Spec.Selector != nil {
				if sel, err := metav1.LabelSelectorAsSelector(src.Spec.Selector); err == nil && !sel.Empty() && sel.Matches(labels.Set(wl.Labels)) {
					applied.Why = append(applied.Why, fmt.Sprintf("its selector %s matches the workload's labels", sel))
				}
			}
		}
		if state, ok := annotated[s]; ok && state == topology.RefResolved {
			why := "the pod annotation " + v1beta1.AnnotationFeatureFlagSource + " names it"
			if s.Namespace != w.Namespace {
				why += " (a ReferenceGrant in " + s.Namespace + " permits it)"
			}
			applied.Why = append(applied.Why, why)
		}
		r.Sources = append(r.Sources, applied)
		for _, ref := range v.FlagSetRefs(s) {
			switch ref.State {
			case topology.RefResolved:
				d := Delivery{FlagSet: ref.FlagSet.Namespace + "/" + ref.FlagSet.Name, Source: applied.Source, Provider: ref.Provider}
				if ref.Provider == string(v1beta1.SyncProviderFile) {
					d.ConfigMap = w.Namespace + "/" + topology.ConfigMapName(ref.FlagSet)
				}
				r.FlagSets = append(r.FlagSets, d)
			default:
				r.Unresolved = append(r.Unresolved, unresolvedRef(s, ref))
			}
		}
	}
	r.InProcessConfigs = names(v.InProcessConfigsOfWorkload(w))

	inj, settings := injection.DesiredWithSettings(v, w, opts)
	if inj.Sidecar != nil {
		r.Sidecar = &Sidecar{Image: inj.Sidecar.Image, Args: inj.Sidecar.Args,
			Note: "computed with the manager's default options; your install's --sidecar-* flags may differ"}
		for _, vol := range inj.Volumes {
			if vol.ConfigMap != nil {
				r.Sidecar.Volumes = append(r.Sidecar.Volumes, vol.ConfigMap.Name)
			}
		}
	}
	for _, e := range settings {
		line := e.Setting + "=" + e.Value + " from " + describe(e.From)
		if e.Block != "" {
			line += " " + e.Block
		}
		r.Settings = append(r.Settings, line)
	}
	for _, c := range inj.Conflicts {
		r.Overridden = append(r.Overridden, c.String())
	}
	for _, d := range inj.PolicyDecisions {
		r.Policies = append(r.Policies, d.String())
	}
	for _, n := range inj.PolicyNotes {
		r.PolicyNotes = append(r.PolicyNotes, fmt.Sprintf("%s %s: %s", describe(n.Policy), n.Block, n.Message))
	}
}

// policyReach is what a FeatureFlagSourcePolicy governs: the sidecars of
// its namespace, when it is accepted.
func policyReach(v *topology.View, k topology.Key) *Reach {
	p, _ := v.SourcePolicy(k)
	if problems := topology.SourcePolicyProblems(p); len(problems) > 0 {
		return &Reach{Unresolved: []string{workflows.InvalidMessage(problems) + ", so it applies to nothing"}}
	}
	var workloads, flagds []topology.Key
	for _, w := range v.GovernedBySourcePolicies(k.Namespace) {
		if w.Kind == topology.KindFlagd {
			flagds = append(flagds, w)
		} else {
			workloads = append(workloads, w)
		}
	}
	return &Reach{Workloads: names(workloads), Flagds: names(flagds), Namespaces: []string{k.Namespace}}
}

func unresolvedRef(s topology.Key, ref topology.FlagSetRef) string {
	at := fmt.Sprintf("FeatureFlagSource %s/%s sources[%d] names FeatureFlag %s/%s", s.Namespace, s.Name, ref.Index, ref.FlagSet.Namespace, ref.FlagSet.Name)
	if ref.State == topology.RefNotPermitted {
		return at + ": no ReferenceGrant in " + ref.FlagSet.Namespace + " permits FeatureFlagSources of " + s.Namespace + " to read it"
	}
	return at + ", which does not exist"
}

func flagSetReach(v *topology.View, f topology.Key) *Reach {
	r := &Reach{Sources: names(v.SourcesOfFlagSet(f)), Namespaces: v.ConsumerNamespaces(f)}
	var workloads, flagds []topology.Key
	for _, s := range v.SourcesOfFlagSet(f) {
		workloads = append(workloads, v.WorkloadsOfSource(s)...)
		flagds = append(flagds, v.FlagdsOfSource(s)...)
	}
	r.Workloads, r.Flagds = names(workloads), names(flagds)
	for _, ns := range r.Namespaces {
		cm := topology.ConfigMapKey(f, ns)
		if v.ConfigMapNeeded(cm) {
			r.ConfigMaps = append(r.ConfigMaps, ns+"/"+topology.ConfigMapName(f))
		}
	}
	return r
}

func sourceReach(v *topology.View, s topology.Key) *Reach {
	r := &Reach{Workloads: names(v.WorkloadsOfSource(s)), Flagds: names(v.FlagdsOfSource(s)),
		Namespaces: v.TargetNamespaces(s), Denied: names(v.DeniedReferrers(s))}
	var flagSets []topology.Key
	for _, ref := range v.FlagSetRefs(s) {
		if ref.State == topology.RefResolved {
			flagSets = append(flagSets, ref.FlagSet)
		} else {
			r.Unresolved = append(r.Unresolved, unresolvedRef(s, ref))
		}
	}
	r.FlagSets = names(flagSets)
	return r
}

// names are keys as "<kind> <namespace>/<name>", sorted, without repeats.
func names(keys []topology.Key) []string {
	var out []string
	for _, k := range keys {
		if n := describe(k); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func describe(k topology.Key) string {
	return string(k.Kind) + " " + k.Namespace + "/" + k.Name
}
