package node

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// runtimeKind says how a container runs on this node.
type runtimeKind int

const (
	// runFlagd runs the real flagd binary, with its port flags remapped.
	runFlagd runtimeKind = iota
	// runBinary runs a local binary that stands in for the image.
	runBinary
	// runPlaceholder runs an idle placeholder: the image has no binary here.
	runPlaceholder
)

func (k runtimeKind) String() string {
	switch k {
	case runFlagd:
		return "flagd"
	case runBinary:
		return "binary"
	default:
		return "placeholder"
	}
}

// imageName is an image reference without its tag or digest:
// "ghcr.io/open-feature/flagd:v0.16.0" → "ghcr.io/open-feature/flagd".
func imageName(ref string) string {
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	// A colon after the last slash starts the tag; one before it belongs
	// to a registry's port ("localhost:5000/flagd").
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		ref = ref[:i]
	}
	return ref
}

// imageMatches tells whether an image reference names the image name, with
// any tag or digest, and with any registry or path prefix when name has
// none of its own: "open-feature/flagd" matches "open-feature/flagd:v1",
// "ghcr.io/open-feature/flagd@sha256:..." and "localhost:5000/open-feature/flagd".
func imageMatches(ref, name string) bool {
	got := imageName(ref)
	name = imageName(name)
	return got == name || strings.HasSuffix(got, "/"+name)
}

// resolveImage says how a container of image ref runs, and with which
// binary.
func (o *Options) resolveImage(ref string) (runtimeKind, string) {
	if imageMatches(ref, o.FlagdImage) {
		return runFlagd, o.FlagdBinary
	}
	// The longest matching name wins, so that "acme/app" beats "app".
	best, binary := "", ""
	for name, path := range o.Binaries {
		if imageMatches(ref, name) && len(name) > len(best) {
			best, binary = name, path
		}
	}
	if binary != "" {
		return runBinary, binary
	}
	return runPlaceholder, ""
}

// imageID identifies what runs for an image: the binary and its digest.
func (n *Node) imageID(kind runtimeKind, binary string) (string, error) {
	if kind == runPlaceholder {
		return "flagplane-node://placeholder", nil
	}
	n.imageMu.Lock()
	defer n.imageMu.Unlock()
	if id, ok := n.imageIDs[binary]; ok {
		return id, nil
	}
	f, err := os.Open(binary)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", binary, err)
	}
	id := "flagplane-node://" + filepath.Base(binary) + "@sha256:" + hex.EncodeToString(h.Sum(nil))
	n.imageIDs[binary] = id
	return id, nil
}
