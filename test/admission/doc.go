// Package admission is the Ginkgo suite of flagplane's admission webhooks on
// a real control plane (etcd, kube-apiserver, kube-controller-manager): the
// operator runs in the test process with its webhook server, the API server
// calls it through the configurations of config/webhook, and Pods are
// created by the ReplicaSet, StatefulSet and DaemonSet paths as on a
// cluster. The webhook serves its own certificates (webhooks/certs), so the
// suite also proves the CA bundle injection.
package admission
