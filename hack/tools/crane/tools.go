//go:build tools

// Package tools pins the crane command. Nothing here is imported by
// flagplane itself.
package tools

import (
	_ "github.com/google/go-containerregistry/cmd/crane"
)
