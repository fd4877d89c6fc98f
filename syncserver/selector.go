package syncserver

import (
	"context"

	"google.golang.org/grpc/metadata"

	"github.com/flagplane/flagplane/topology"
)

// SelectorPrefix starts every selector (topology.SelectorPrefix): a
// selector names one FeatureFlag as "core.openfeature.dev/<namespace>/<name>",
// as the OpenFeature Operator's flagd-proxy does, so that clients configured
// for flagd-proxy work unchanged.
const SelectorPrefix = topology.SelectorPrefix

// SelectorHeader is the gRPC metadata key by which newer flagd clients send
// their selector; older ones send it in the request body. The header wins
// when both are present, as in flagd's own sync service.
const SelectorHeader = "flagd-selector"

// Selector is the selector of a flag set.
func Selector(flagSet topology.Key) string {
	return SelectorPrefix + flagSet.Namespace + "/" + flagSet.Name
}

// ParseSelector returns the flag set a selector names (topology.ParseSelector).
func ParseSelector(selector string) (topology.Key, error) { return topology.ParseSelector(selector) }

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
