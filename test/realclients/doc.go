// Package realclients proves what flagplane produces with real clients that
// nobody here wrote, on a real control plane:
//
//   - flagd v0.16.0 reading the ConfigMap content flagplane generated,
//     projected into a directory the way the kubelet projects a ConfigMap
//     volume (a "..data" symlink swapped atomically on every update);
//   - flagd syncing over gRPC from flagplane's sync server, configured as
//     syncserver.SidecarSource says the injected sidecar is, the edit
//     arriving by push;
//   - the OpenFeature Go SDK with flagd's provider in in-process mode,
//     syncing from the sync server with a service-account token;
//   - flagd answering the flags of flag sets rendered as flagplane serves
//     them exactly as `flagplane diff --contexts` says it would (flagd's
//     evaluator linked into the CLI, inspect/evaluate), for every
//     flag, context and type asked.
//
// The clients are built from their Go modules by `make realclients` into the
// repository's bin/ folder (flagd from hack/tools/flagd, the SDK client from
// the module in ./sdkclient, which keeps the provider's dependencies out of
// the operator's go.mod). Every server the suite starts listens on loopback.
package realclients
