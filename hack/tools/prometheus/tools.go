//go:build tools

// Package tools pins the Prometheus server that test/e2e runs for the
// rollout policies' Prometheus gate: it scrapes flagd's metrics and answers
// the manager's instant queries. Nothing here is imported by flagplane
// itself.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
)
