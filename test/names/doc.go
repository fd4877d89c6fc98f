// Package names runs flagplane with names at the limits Kubernetes sets,
// against the real API server: a 63-character namespace, a FeatureFlag, a
// FeatureFlagSource and a Deployment of 253 characters, a Flagd of the
// longest name it admits (a DNS-1035 label, 63 characters). Every object
// flagplane derives from them (the ConfigMap and its data key, the Roles
// and RoleBindings, the Flagd's Deployment and Service, the pod admission
// mutates: its volumes, mount paths and flagd arguments) must pass the API
// server's validation, and the test node (test/node), which mounts the
// volumes at their paths in a mount namespace of its own, must run the
// pods, the injected flagd serving the flag by every provider. The unit
// property test of the same rule is workflows/derivednames_test.go.
package names
