// Package api is flagplane's API: the core.openfeature.dev/v1beta1 kinds
// (api/v1beta1) and flagplane's own groups, policy.flagplane.dev
// (api/policy/v1alpha1), delivery.flagplane.dev (api/delivery/v1alpha1),
// and the fleet hub's fleet.flagplane.dev (api/fleet/v1alpha1).
// Every group registers with a scheme through AddToScheme here, the one
// place that lists them (scheme_test.go keeps it so).
package api

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	fleetv1alpha1 "github.com/flagplane/flagplane/api/fleet/v1alpha1"
	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
)

// groups registers every API group of flagplane.
var groups = runtime.SchemeBuilder{
	v1beta1.AddToScheme,
	policyv1alpha1.AddToScheme,
	deliveryv1alpha1.AddToScheme,
	fleetv1alpha1.AddToScheme,
}

// AddToScheme adds every API group of flagplane to a scheme.
var AddToScheme = groups.AddToScheme

// NewScheme is a scheme with client-go's kinds and flagplane's API: what
// the manager, the CLI and the tests read and write.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding client-go's kinds to the scheme: %w", err)
	}
	if err := AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding flagplane's API to the scheme: %w", err)
	}
	return s, nil
}
