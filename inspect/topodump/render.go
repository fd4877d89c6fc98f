package topodump

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/flagplane/flagplane/inspect/dotsvg"
)

// Formats are the output formats: DOT as is, SVG drawn in Go, PNG rendered
// by Graphviz.
var Formats = []string{"dot", "svg", "png"}

// ErrGraphvizMissing is returned when rendering PNG needs Graphviz's `dot`
// command and it is not installed.
var ErrGraphvizMissing = errors.New("rendering PNG needs Graphviz's `dot` command, which is not in PATH: " +
	"use --format svg, which needs nothing, or install Graphviz (Debian/Ubuntu: apt-get install graphviz; " +
	"macOS: brew install graphviz)")

// Render turns DOT into format: dot returns it unchanged; svg is laid out
// and drawn in this process (package dotsvg); png runs Graphviz's `dot`.
func Render(ctx context.Context, dot []byte, format string) ([]byte, error) {
	switch format {
	case "dot", "":
		return dot, nil
	case "svg":
		svg, err := dotsvg.Render(dot)
		if err != nil {
			return nil, fmt.Errorf("drawing the topology as SVG: %w", err)
		}
		return svg, nil
	case "png":
		return graphviz(ctx, dot, format)
	default:
		return nil, fmt.Errorf("unknown format %q: use one of %s", format, strings.Join(Formats, ", "))
	}
}

// graphviz runs `dot -Tformat` on dot.
func graphviz(ctx context.Context, dot []byte, format string) ([]byte, error) {
	path, err := exec.LookPath("dot")
	if err != nil {
		return nil, ErrGraphvizMissing
	}
	cmd := exec.CommandContext(ctx, path, "-T"+format)
	cmd.Stdin = bytes.NewReader(dot)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("running %s -T%s: %w: %s", path, format, err, strings.TrimSpace(stderr.String()))
	}
	return out.Bytes(), nil
}
