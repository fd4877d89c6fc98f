package topology

import "slices"

// Consumers is, namespace by namespace, what the copies of a flag set are
// to hold and who reads them, gathered in one pass (View.ConsumersOf):
// what a flag set's delivery status and a staged rollout compare the
// copies that the cluster holds with. It is a value: the questions it
// answers are asked of the graph once, not once per namespace.
type Consumers struct {
	// FlagSet is the flag set's key.
	FlagSet Key
	// InGraph says that the graph holds the flag set; when it does not,
	// no namespace is planned anything (View.ServedFor's ok).
	InGraph bool
	// Staged says that a rollout plan decides what each namespace serves
	// (RolloutPlan.Staged).
	Staged bool
	// ConfigMapName and ConfigMapDataKey name its generated ConfigMaps and
	// the key of their content.
	ConfigMapName, ConfigMapDataKey string
	// ConfigMaps lists the namespaces that need a generated ConfigMap of
	// it (View.ConsumerNamespaces), sorted.
	ConfigMaps []string
	// Readers lists, by namespace, the workloads and Flagds whose flagd
	// can say which revision of it they serve: those that read it from a
	// copy flagplane writes (View.Readers), and not also with the
	// kubernetes provider. What flagd reads itself from the API server
	// names no revision, and flagd answers a flag from whichever of its
	// sources it read last: such a reader is counted in
	// UnobservedReaders instead.
	Readers []PlanConsumer
	// Copies is what the copies in each namespace that the graph or the
	// plan knows (a generated ConfigMap's, a reader's, a consumer of the
	// plan) are to hold; Elsewhere, in any other namespace (an in-process
	// SDK's on the sync server, which the graph does not see).
	Copies    map[string]CopyPlan
	Elsewhere CopyPlan

	view *View
}

// CopyPlan is what the copies of a flag set in one namespace are to hold.
type CopyPlan struct {
	// ConfigMap says that the namespace needs a generated ConfigMap of the
	// flag set (View.ConfigMapNeeded).
	ConfigMap bool
	// Revision is the revision the rollout plan gives the namespace
	// (RolloutPlan.RevisionFor); "" when no plan stages the flag set.
	Revision string
	// Served is the content it is to serve (View.ServedFor).
	Served Served
}

// anyNamespace is the namespace that names none: the plan gives it what it
// gives a namespace it does not know.
const anyNamespace = ""

// ConsumersOf gathers what the copies of flag set f are to hold and who
// reads them (Consumers).
func (v *View) ConsumersOf(f Key) Consumers {
	_, inGraph := v.FlagSetRendered(f)
	plan := v.RolloutPlan(f)
	c := Consumers{FlagSet: f, InGraph: inGraph, Staged: plan.Staged(),
		ConfigMapName: ConfigMapName(f), ConfigMapDataKey: ConfigMapDataKey(f),
		ConfigMaps: v.ConsumerNamespaces(f), Copies: map[string]CopyPlan{}, view: v}
	readers, kubernetes := v.Readers(f)
	c.Readers = confirmable(readers, kubernetes)
	namespaces := slices.Clone(c.ConfigMaps)
	for _, r := range readers {
		namespaces = append(namespaces, r.Namespace)
	}
	if plan != nil {
		for _, pc := range plan.Consumers {
			namespaces = append(namespaces, pc.Namespace)
		}
	}
	for _, ns := range namespaces {
		if _, ok := c.Copies[ns]; !ok {
			c.Copies[ns] = v.copyPlan(f, plan, ns)
		}
	}
	c.Elsewhere = v.copyPlan(f, plan, anyNamespace)
	return c
}

// copyPlan is what the copies of flag set f in namespace are to hold under
// plan.
func (v *View) copyPlan(f Key, plan *RolloutPlan, namespace string) CopyPlan {
	p := CopyPlan{ConfigMap: v.ConfigMapNeeded(ConfigMapKey(f, namespace))}
	if plan.Staged() {
		p.Revision = plan.RevisionFor(namespace)
	}
	p.Served, _ = v.ServedFor(f, namespace)
	return p
}

// confirmable drops from readers the workloads and Flagds that read the
// flag set with the kubernetes provider too, and the namespaces left with
// none.
func confirmable(readers []PlanConsumer, kubernetes []Key) []PlanConsumer {
	if len(kubernetes) == 0 {
		return readers
	}
	out := make([]PlanConsumer, 0, len(readers))
	for _, r := range readers {
		ws := slices.DeleteFunc(slices.Clone(r.Workloads), func(w Key) bool { return slices.Contains(kubernetes, w) })
		if len(ws) > 0 {
			r.Workloads = ws
			out = append(out, r)
		}
	}
	return out
}

// Recorded is the rendering of the flag set's revision of hash
// (View.RevisionRendered): what a copy that names a revision of its own is
// held against. It is looked up, not gathered: the flag set's history may
// hold many revisions, and a copy names one only when its content is not
// what its namespace is planned.
func (c Consumers) Recorded(hash string) (Rendered, bool) {
	return c.view.RevisionRendered(c.FlagSet, hash)
}
