package syncserver

import (
	"net"
	"strconv"

	"github.com/flagplane/flagplane/topology"
)

// SidecarOptions say where injected flagd sidecars find the sync server.
type SidecarOptions struct {
	// Host is the sync server's name as pods resolve it: the DNS name of the
	// Service in front of the manager, e.g. "flagplane-sync.flagplane-system.svc".
	Host string
	// Port is the Service's port (DefaultPort when 0).
	Port int32
}

// DefaultPort is the sync server's port, flagd's and flagd-proxy's sync port.
const DefaultPort = 8015

// SidecarSource says how an injected flagd sidecar syncs a flag set from this
// server, for a FeatureFlagSource entry with provider flagd-proxy (or grpc
// naming flagplane): the URI and selector of a flagd `--sources` entry with
// provider "grpc":
//
//	{"uri": uri, "provider": "grpc", "selector": selector,
//	 "headers": SidecarHeaders(token)}
//
// plus "tls": true and "certPath" (the CA bundle in the sidecar that signs
// the server's certificate; the system roots when empty) when the server
// runs with TLS.
//
// The URI is "host:port": in `--sources` flagd takes no scheme for grpc
// (TLS is the entry's "tls" field); "grpc://" and "grpcs://" are only for
// its `--uri` flag. The sidecar proves its namespace with the headers of
// SidecarHeaders.
func SidecarSource(flagSet topology.Key, opts SidecarOptions) (uri, selector string) {
	port := opts.Port
	if port == 0 {
		port = DefaultPort
	}
	return net.JoinHostPort(opts.Host, strconv.Itoa(int(port))), Selector(flagSet)
}

// SidecarHeaders are the gRPC headers (flagd's per-source "headers") by which
// a sidecar presents its credential: a namespace token that
// NamespaceTokens.Issue made for the pod's namespace.
func SidecarHeaders(token string) map[string]string {
	return map[string]string{AuthorizationHeader: "Bearer " + token}
}
