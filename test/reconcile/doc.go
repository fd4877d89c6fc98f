// Package reconcile holds the Ginkgo suite of flagplane's reconciliation on a
// real control plane (etcd, kube-apiserver, kube-controller-manager): one
// spec per kind and event type, each asserting the state of the world.
package reconcile
