package app

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"
)

// FleetOptions run the manager as a fleet hub (--fleet-* flags): only the
// hub's controllers (controllers/fleet), which place the hub's
// FeatureFlags onto the member clusters of the inventory; none of the
// single-cluster controllers, webhooks or the sync server.
type FleetOptions struct {
	// Hub runs the manager as a fleet hub (--fleet-hub).
	Hub bool
	// InventoryNamespace holds the ClusterProfiles and FleetGrants
	// (--fleet-inventory-namespace).
	InventoryNamespace string
	// AccessConfig is the file of the access providers, which map a
	// ClusterProfile's access providers to the exec plugins that give the
	// hub its credentials for the member (--fleet-access-config).
	AccessConfig string
	// Heartbeat is how often the hub asks each member's API server whether
	// it answers (--fleet-heartbeat).
	Heartbeat time.Duration
}

// DefaultInventoryNamespace is the inventory's namespace unless told.
const DefaultInventoryNamespace = "fleet-system"

// FleetHubLeaderElectionID is the Lease of a hub left with the
// single-cluster manager's default --leader-election-id: a hub and a
// single-cluster manager in one namespace do not wait for each other.
const FleetHubLeaderElectionID = "hub.fleet.flagplane.dev"

func defaultFleetOptions() FleetOptions {
	return FleetOptions{InventoryNamespace: DefaultInventoryNamespace, Heartbeat: 5 * time.Second}
}

// bindFleetFlags binds the fleet hub's flags.
func (o *Options) bindFleetFlags(fs *flag.FlagSet) {
	f := &o.Fleet
	fs.BoolVar(&f.Hub, "fleet-hub", f.Hub, "run as a fleet hub: only the controllers that place this cluster's FeatureFlags onto the member "+
		"clusters of the inventory (FeatureFlagPlacement), without the single-cluster controllers, webhooks and sync server; "+
		"its Lease is "+FleetHubLeaderElectionID+" unless --leader-election-id names another")
	fs.StringVar(&f.InventoryNamespace, "fleet-inventory-namespace", f.InventoryNamespace, "namespace of the inventory's ClusterProfiles and of the FleetGrants (with --fleet-hub)")
	fs.StringVar(&f.AccessConfig, "fleet-access-config", f.AccessConfig, "JSON file of the access providers: for each provider a ClusterProfile names, "+
		`the exec plugin that gives the hub its credentials for the member ({"providers": [{"name": ..., "execConfig": {...}}]}); required with --fleet-hub`)
	fs.DurationVar(&f.Heartbeat, "fleet-heartbeat", f.Heartbeat, "how often the hub asks each member's API server whether it answers (with --fleet-hub)")
}

// validateFleet checks the fleet flags, which only a hub reads.
func (o Options) validateFleet() []error {
	f := o.Fleet
	if !f.Hub {
		return nil
	}
	var errs []error
	if f.AccessConfig == "" {
		errs = append(errs, errors.New("--fleet-hub needs --fleet-access-config: the file of the access providers through which the hub reaches the members"))
	}
	if msgs := validation.IsDNS1123Label(f.InventoryNamespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--fleet-inventory-namespace: %q is not a namespace name: %s", f.InventoryNamespace, strings.Join(msgs, "; ")))
	}
	if f.Heartbeat <= 0 {
		errs = append(errs, fmt.Errorf("--fleet-heartbeat must be positive, not %s", f.Heartbeat))
	}
	if len(o.Namespaces) > 0 {
		errs = append(errs, errors.New("--namespaces does not go with --fleet-hub: the hub places the FeatureFlags of every namespace its FleetGrants grant"))
	}
	return errs
}

// loadAccess reads the access providers of --fleet-access-config.
func loadAccess(path string) (*access.Config, error) {
	cfg, err := access.NewFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("--fleet-access-config %s: %w", path, err)
	}
	if len(cfg.Providers) == 0 {
		return nil, fmt.Errorf("--fleet-access-config %s names no access provider: the hub could reach no member", path)
	}
	for i, p := range cfg.Providers {
		if p.Name == "" || p.ExecConfig == nil || p.ExecConfig.Command == "" {
			return nil, fmt.Errorf("--fleet-access-config %s: provider %d needs a name and an execConfig with a command", path, i)
		}
	}
	return cfg, nil
}
