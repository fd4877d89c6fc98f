// Package sizes is the integration suite of the delivery modes' size
// limits (topology.Rendered.Overflow): the whole operator (test/operator)
// with its admission webhooks and its sync server, on a real control plane
// with kube-scheduler, and a test node (test/node) that runs the injected
// flagd sidecars as the real flagd binary.
//
// A flag set of 2,500 flags, some 1.2 MB rendered for flagd, is more than
// a ConfigMap holds (1 MiB, the API server's limit) and less than a sync
// message flagd takes (4 MiB). The specs show, end to end:
//
//   - admission: the FeatureFlag is admitted with a warning that names its
//     size, the limit and the modes that can carry it; a FeatureFlagSource
//     that would deliver it with the file provider is refused; an edit
//     that grows a flag set read with the file provider is refused;
//   - when the combination arises anyway (the validating webhook is
//     removed for a moment, as when it is down): the ConfigMap keeps its
//     last good content, which the workload's flagd keeps serving, and the
//     status of the FeatureFlag and the source, and a Warning Event on
//     each, say which flag set, its size, the limit and what to do
//     (FlagSetTooLarge); once it fits again it is delivered;
//   - the same flag set delivered through the sync server (flagd-proxy) and
//     the kubernetes provider: Programmed, delivered, evaluated;
//   - the sync message limit of the real flagd: its gRPC sync client takes
//     a message of exactly 4 MiB and refuses one byte more (an in-process
//     sync server over a graph of its own, since the API server's storage
//     takes no FeatureFlag that large), and takes more only with a
//     --sources maxMsgSize, which flagplane does not write.
//
// It needs bin/flagd (`make realclients` builds it).
package sizes
