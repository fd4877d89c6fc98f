// Package install holds the Ginkgo suite of flagplane's installation on a
// real control plane (etcd, kube-apiserver, kube-controller-manager):
// `kubectl apply -k config/default` and `config/namespaced` as a platform
// team would run them, the matrix of what the manager's ServiceAccount may
// and may not do (`kubectl auth can-i --as`), and the manager run with
// exactly that RBAC and config/policy's ValidatingAdmissionPolicy —
// impersonating its ServiceAccount — becoming ready, doing every write its
// workflows need, serving metrics and its topology only to callers the API
// server authenticates and authorizes; then a table of crafted misuse that
// the API server refuses with the policy's message.
package install
