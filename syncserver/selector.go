package syncserver

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/metadata"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flagplane/flagplane/topology"
)

// SelectorPrefix starts every selector: a selector names one FeatureFlag as
// "core.openfeature.dev/<namespace>/<name>", as the OpenFeature Operator's
// flagd-proxy does, so that clients configured for flagd-proxy work unchanged.
const SelectorPrefix = "core.openfeature.dev/"

// SelectorHeader is the gRPC metadata key by which newer flagd clients send
// their selector; older ones send it in the request body. The header wins
// when both are present, as in flagd's own sync service.
const SelectorHeader = "flagd-selector"

// Selector is the selector of a flag set.
func Selector(flagSet topology.Key) string {
	return SelectorPrefix + flagSet.Namespace + "/" + flagSet.Name
}

// ParseSelector returns the flag set a selector names. The namespace and name
// must be valid Kubernetes names, so that no selector can name something
// outside the FeatureFlag it appears to name.
func ParseSelector(selector string) (topology.Key, error) {
	rest, ok := strings.CutPrefix(selector, SelectorPrefix)
	if !ok {
		return topology.Key{}, fmt.Errorf("selector %q does not start with %q: want %s<namespace>/<name>", selector, SelectorPrefix, SelectorPrefix)
	}
	ns, name, ok := strings.Cut(rest, "/")
	if !ok {
		return topology.Key{}, fmt.Errorf("selector %q names no FeatureFlag: want %s<namespace>/<name>", selector, SelectorPrefix)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return topology.Key{}, fmt.Errorf("selector %q: namespace %q is invalid: %s", selector, ns, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return topology.Key{}, fmt.Errorf("selector %q: name %q is invalid: %s", selector, name, strings.Join(errs, "; "))
	}
	return topology.FlagSetKey(ns, name), nil
}

// requestSelector is the selector of a request: the Flagd-Selector header if
// present, else the request body's.
func requestSelector(ctx context.Context, body string) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(SelectorHeader); len(v) > 0 && v[0] != "" {
			return v[0]
		}
	}
	return body
}
