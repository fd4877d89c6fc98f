//go:build tools

// Package tools pins the helm command that the Makefile and the install
// suite run on charts/flagplane. Nothing here is imported by flagplane itself.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
