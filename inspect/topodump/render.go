package topodump

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// Formats are the output formats: DOT as is, or rendered by Graphviz.
var Formats = []string{"dot", "svg", "png"}

// ErrGraphvizMissing is returned when rendering needs Graphviz's `dot`
// command and it is not installed.
var ErrGraphvizMissing = errors.New("rendering SVG or PNG needs Graphviz's `dot` command, which is not in PATH: " +
	"install Graphviz (Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz), " +
	"or use --format dot and render elsewhere")

// DotCommand is the Graphviz command Render runs.
var DotCommand = "dot"

// Render turns DOT into format: dot returns it unchanged; svg and png run
// Graphviz.
func Render(ctx context.Context, dot []byte, format string) ([]byte, error) {
	switch format {
	case "dot", "":
		return dot, nil
	case "svg", "png":
	default:
		return nil, fmt.Errorf("unknown format %q: use one of %s", format, strings.Join(Formats, ", "))
	}
	path, err := exec.LookPath(DotCommand)
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
