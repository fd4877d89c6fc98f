package app

import (
	"crypto/tls"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The secure metrics server asks the API server who a caller is and whether
// it may get the path (/metrics, /debug/topology). Cluster-scoped, so a
// namespace-scoped install (config/namespaced) needs a cluster administrator
// to grant them, e.g. by binding system:auth-delegator (see docs/install.md,
// "Namespace-scoped mode").
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// metricsOptions are the options of the server of /metrics and of extra,
// which holds /debug/topology. With MetricsSecure every handler, extra ones
// included (controller-runtime wraps each of them in the filter), answers
// only to callers the API server authenticates and authorizes: 401 without a
// valid bearer token, 403 without get on the path.
func metricsOptions(o Options, extra map[string]http.Handler) metricsserver.Options {
	mo := metricsserver.Options{BindAddress: o.MetricsBindAddress, ExtraHandlers: extra}
	if !o.MetricsSecure {
		return mo
	}
	mo.SecureServing = true
	mo.FilterProvider = filters.WithAuthenticationAndAuthorization
	mo.CertDir = o.MetricsCertDir
	// HTTP/1.1 only: HTTP/2's stream resets let an unauthenticated caller
	// make the server work before the filter answers (CVE-2023-44487,
	// CVE-2023-39325); scrapers need nothing more.
	mo.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	return mo
}
