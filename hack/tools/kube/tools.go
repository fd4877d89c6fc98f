//go:build tools

// Package tools pins the Kubernetes control-plane commands that the test
// harness runs. Nothing here is imported by flagplane itself.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
