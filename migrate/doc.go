// Package migrate finds what the OpenFeature Operator left on a cluster
// that flagplane now does, says what each leftover means, and removes what
// flagplane replaces. It backs `flagplane migrate`.
//
// Scan reads the cluster and returns a Report: OpenFeature Operator objects
// (its webhook configurations, the ClusterRoleBinding that grows with every
// ServiceAccount of a kubernetes-provider workload, its own cluster-wide
// RBAC, the ConfigMaps it generated for the file provider, its flagd-proxy
// Deployment, Service, PodDisruptionBudget and ServiceAccount), the pods
// still running its sidecar, and the CRDs and custom resources flagplane
// takes over. Apply deletes what the report says to remove, never what a
// running pod still uses and never while the OpenFeature Operator's manager
// runs (it would put it back).
//
// The names, labels and annotations are the OpenFeature Operator's (v0.9.x,
// installed by its Helm chart or its release manifests).
package migrate
