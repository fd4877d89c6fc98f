// Package install holds the Ginkgo suite of flagplane's installation on a
// real control plane (etcd, kube-apiserver, kube-controller-manager):
// `kubectl apply -k config/default` and `config/namespaced` as a platform
// team would run them, the matrix of what the manager's ServiceAccount may
// and may not do (`kubectl auth can-i --as`), and the manager run with
// exactly that RBAC — impersonating its ServiceAccount — becoming ready,
// reconciling the samples, serving metrics and its topology.
package install
