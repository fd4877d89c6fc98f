package fleet

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetwf "github.com/flagplane/flagplane/workflows/fleet"
)

// Engine is a source of members other than the inventory's
// ClusterProfiles (Options.Engine): a harness that simulates many members,
// or another way of reaching them. The placements still select among the
// inventory's ClusterProfiles, by name; the engine answers for the members
// of those names.
type Engine interface {
	fleetwf.Members
	// Start engages the members and runs until ctx ends. For every event
	// of a member's FeatureFlag it sends on changed that FeatureFlag as
	// the hub names it (the hub's namespace, its name and its labels), and
	// a FeatureFlag without a name when a member's reach changes, as the
	// inventory's members do.
	Start(ctx context.Context, changed chan<- event.GenericEvent) error
}

// members are the hub's members: the engine's when one is set, run by
// mgr, or else those engaged from the inventory's ClusterProfiles.
func (o Options) members(mgr manager.Manager, inInventory predicate.Predicate,
	changed chan<- event.GenericEvent) (fleetwf.Members, *Members, error) {
	if o.Engine != nil {
		err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return o.Engine.Start(ctx, changed) }))
		return o.Engine, nil, err
	}
	members, err := addInventory(mgr, o, inInventory, changed)
	return members, members, err
}
