// Package syncserver is flagplane's built-in flagd sync server: it serves
// flagd's sync protocol (flagd.sync.v1.FlagSyncService: SyncFlags,
// FetchAllFlags, GetMetadata) from the topology, and pushes a flag set to its
// subscribers the moment the graph changes. It is the OpenFeature
// Operator's flagd-proxy idea, done on the graph: workloads get their flags
// over gRPC without any RBAC of their own.
//
// # Selectors
//
// A subscriber names one FeatureFlag as "core.openfeature.dev/<ns>/<name>",
// as with flagd-proxy, in the Flagd-Selector header (newer clients) or the
// request body (older ones); the header wins. The content served is exactly
// what flagplane writes into the ConfigMaps of file-mode consumers: the
// flag set's rendering in the topology (topology.View.FlagSetRendered,
// made once per edit by flagsets.Validator.Rendering). An invalid edit is
// not served: subscribers keep
// the last valid content, as ConfigMaps do. A flag set that does not exist
// is served as EmptyFlagSet.
//
// # Identity
//
// Every call carries "authorization: Bearer <token>" metadata, checked by the
// Options.Authenticator (a Chain of):
//
//   - TokenReviews: a Kubernetes service-account token for audience
//     "flagplane" (a projected token, which the kubelet rotates), checked with
//     the API server's TokenReview and cached briefly. The subscriber's
//     namespace is the service account's. This is what SDKs in in-process
//     mode use: they read the projected token file for every call. Since
//     anyone who reaches the port can present tokens, the reviews a caller
//     can cause are bounded: tokens that cannot be valid are refused by
//     their form, refusals are cached, and reviews of tokens that never
//     passed one are rate-limited (ReviewLimit), globally and per client
//     address, past which calls fail with Unavailable. Tokens that passed a
//     review are never limited.
//   - NamespaceTokens: flagplane's own HMAC token of a namespace, for the
//     injected flagd sidecar, which can only send a fixed header written at
//     admission (see SidecarSource, and NamespaceTokens.HeadersFor, which
//     the webhook's injection.Options.SyncServerHeaders is).
//
// A call without a valid credential fails with Unauthenticated. Identity is
// checked when a stream opens; entitlement for as long as it lives.
//
// # Entitlement
//
// A subscriber may read the flag sets of its own namespace, and a flag set of
// another namespace that a FeatureFlagSource of its namespace references,
// when that reference is Resolved, i.e. permitted by a ReferenceGrant, the
// same rule by which flagplane copies a flag set into a consuming
// namespace's ConfigMap (see Entitled). Anything else fails with
// PermissionDenied, with the same message whether or not the flag set exists.
// Entitlement is decided again whenever the flag set is in a Delta: a stream
// whose namespace lost it ends with PermissionDenied.
//
// # Delivery
//
// The controllers call FlagSetsChanged with the flag sets of a topology.Delta after
// every edit of the graph. Only the subscribers of those flag sets are
// touched. One goroutine reads each changed flag set's rendering once, from
// a view taken after the edit, and offers it to its subscribers by
// replacing a one-slot "latest" value and waking the stream's goroutine,
// which sends. A slow subscriber therefore skips intermediate states but
// always gets the newest, and never holds back the others or the
// controllers. Views are taken in order, so no subscriber is ever offered an
// older state after a newer one. A flag set whose message would be larger
// than the server sends (Options.MaxMessageSize) is not offered: its
// subscribers keep the last content that fitted, as ConfigMaps do.
//
// # Delivery status
//
// The hub remembers, for every stream, the revision (the topology's revision
// of the content, as a FeatureFlag's status.revision) and the time of the
// last state sent on it: sent, not acknowledged, as flagd's sync protocol
// has no acknowledgement. Every replica serves streams while only the leader
// writes status, so every replica's Reporter publishes, per flag set and
// subscriber namespace, how many streams hold which revision since when
// (status.SyncReport), as a ConfigMap of the manager's namespace labelled
// status.SyncReportLabel and owned by the replica's Pod ($POD_NAME,
// $POD_UID; the host name outside a Pod): at most once per
// DefaultReportInterval and only when it changed, split over several
// ConfigMaps (shards) of status.MaxSyncReportEntries entries each, up to
// MaxReportShards, deleted when no stream is left and when the replica
// stops. The leader folds the reports into the status (package status,
// SyncReports).
//
// # Transport
//
// Keepalive pings from clients are permitted every KeepaliveMinTime (flagd's
// providers ping every 30s; gRPC's default policy would disconnect them), the
// server pings idle connections to drop vanished subscribers, the maximum
// message size is configurable, and TLS is optional with certificates
// reloaded on rotation. Every replica serves: the graph is built by every
// replica's informers, and Ready holds calls off (Unavailable) until it is.
package syncserver
