package realnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// JSClientImage runs test/realclients/jsclient: the OpenFeature JavaScript
// server SDK with flagd's provider from npm, an application configured by
// the FLAGD_* env flagplane injects, on the machine's Node.js.
const JSClientImage = "localhost:5000/flagplane/jsclient:dev"

// JSClientAt is the JavaScript client under ref: this machine's node with
// the shared libraries it loads, and bin/jsclient (`make jsclient`: the
// client's *.js and the node_modules npm ci installed) as /app, run as
// `node /app/client.js` by an unprivileged user.
func JSClientAt(ref, binDir string) (Image, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return Image{}, fmt.Errorf("image %s: %w (run `make jsclient`, which installs Node.js)", ref, err)
	}
	if node, err = filepath.EvalSymlinks(node); err != nil {
		return Image{}, fmt.Errorf("image %s: %w", ref, err)
	}
	app := filepath.Join(binDir, "jsclient")
	if _, err := os.Stat(filepath.Join(app, "node_modules", "@openfeature", "flagd-provider")); err != nil {
		return Image{}, fmt.Errorf("image %s: %w (run `make jsclient`)", ref, err)
	}
	files, err := WithLibraries(ImageFile{Src: node, Dst: "/usr/bin/node"})
	if err != nil {
		return Image{}, fmt.Errorf("image %s: %w", ref, err)
	}
	return Image{
		Ref:        ref,
		Files:      files,
		Trees:      []ImageTree{{Src: app, Dst: "/app"}},
		Dirs:       []ImageDir{{Dst: "/tmp", Mode: 0o1777}},
		Entrypoint: []string{"/usr/bin/node", "/app/client.js"},
		User:       "65532:65532",
		Env:        []string{"NODE_ENV=production"},
	}, nil
}
