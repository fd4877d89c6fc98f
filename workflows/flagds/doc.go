// Package flagds runs the Flagd kind: a flagd Deployment, its Service and,
// when asked, an Ingress and an HTTPRoute, serving one FeatureFlagSource.
//
// What it computes, from a topology.View and the operator's Options (the
// manager's --flagd-* flags), reading no cluster state:
//
//   - Desired: a Flagd's Objects — the Deployment (whose container is the
//     sidecar's, from injection.ContainerOfSource), the Service, the
//     Ingress and the HTTPRoute, the ConfigMaps the Deployment mounts and
//     where the objects serve flagd's APIs; Validate says what in a spec
//     cannot be generated;
//   - DesiredStatus: the status of a Flagd, from its Objects and what the
//     apply step found (Children).
//
// What it applies: the Reconciler writes the objects with server-side apply
// (field manager flagplane) only when they differ from the cache, deletes
// the Ingress and HTTPRoute no longer asked for, keeps the Role and
// RoleBinding of the Flagd's service account through the rbac workflow,
// and writes the status.
//
// The golden files under testdata hold, for each case, every Flagd's
// objects, RBAC and status (go test ./workflows/flagds -run TestFlagdGolden
// -update rewrites them; a changed golden file needs its reason in the
// commit).
package flagds
