//go:build tools

// Package tools pins the Kubernetes commands that the test harness runs: the
// control plane (kube-scheduler for the suites that run pods on test/node),
// the real node's kubelet and kube-proxy (test/realnode), and kubectl so that tests never use the host's. Nothing here
// is imported by flagplane itself.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
