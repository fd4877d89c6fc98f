package fleet

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	fleetv1alpha1 "github.com/flagplane/flagplane/api/fleet/v1alpha1"
)

// Selected is one cluster a placement selects.
type Selected struct {
	// Cluster is the ClusterProfile's name.
	Cluster string
	// Granted says whether the placement's namespace may place there.
	Granted bool
	// Labels are the ClusterProfile's labels, which rollout steps select.
	Labels map[string]string
}

// Select returns the clusters among profiles that the placement's
// clusterSelector picks, by name, each with whether a grant lets the
// placement's namespace place there. A selector that does not parse picks
// nothing, and its error says why.
func Select(p *fleetv1alpha1.FeatureFlagPlacement, profiles []cpv1alpha1.ClusterProfile,
	grants []fleetv1alpha1.FleetGrant) ([]Selected, error) {
	sel, err := metav1.LabelSelectorAsSelector(&p.Spec.ClusterSelector)
	if err != nil {
		return nil, fmt.Errorf("spec.clusterSelector: %w", err)
	}
	granted := grantSelectors(p.Namespace, grants)
	var out []Selected
	for i := range profiles {
		cp := &profiles[i]
		set := labels.Set(cp.Labels)
		if !sel.Matches(set) {
			continue
		}
		out = append(out, Selected{Cluster: cp.Name, Granted: anyMatches(granted, set), Labels: cp.Labels})
	}
	slices.SortFunc(out, func(a, b Selected) int {
		if a.Cluster < b.Cluster {
			return -1
		}
		if a.Cluster > b.Cluster {
			return 1
		}
		return 0
	})
	return out, nil
}

// GrantedNamespaces returns, for one cluster's labels, the hub namespaces
// that grants give it: the namespaces the hub may write in there.
func GrantedNamespaces(clusterLabels map[string]string, grants []fleetv1alpha1.FleetGrant) []string {
	set := labels.Set(clusterLabels)
	var out []string
	for i := range grants {
		g := &grants[i]
		sel, err := metav1.LabelSelectorAsSelector(&g.Spec.ClusterSelector)
		if err != nil || !sel.Matches(set) {
			continue
		}
		out = append(out, g.Spec.Namespaces...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// grantSelectors are the cluster selectors of the grants that name
// namespace. A grant whose selector does not parse grants nothing.
func grantSelectors(namespace string, grants []fleetv1alpha1.FleetGrant) []labels.Selector {
	var out []labels.Selector
	for i := range grants {
		g := &grants[i]
		if !slices.Contains(g.Spec.Namespaces, namespace) {
			continue
		}
		if sel, err := metav1.LabelSelectorAsSelector(&g.Spec.ClusterSelector); err == nil {
			out = append(out, sel)
		}
	}
	return out
}

func anyMatches(sels []labels.Selector, set labels.Set) bool {
	for _, s := range sels {
		if s.Matches(set) {
			return true
		}
	}
	return false
}
