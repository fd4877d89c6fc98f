//go:build tools

// Package tools pins the flagd daemon that the real-client tests run: flagd
// reads the ConfigMaps flagplane generates and syncs from flagplane's sync
// server. Nothing here is imported by flagplane itself.
package tools

import (
	_ "github.com/open-feature/flagd/flagd"
)
