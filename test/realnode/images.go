package realnode

import (
	"os/exec"
	"path/filepath"
	"strings"
)

// Image is an image the node's registry serves: an OCI layout (`make
// image`), or files on an empty base.
type Image struct {
	// Ref is the reference manifests use, e.g. ghcr.io/open-feature/flagd:v0.16.0.
	Ref string
	// Layout is an OCI image layout directory holding one image.
	Layout string
	// Files, Dirs, Trees, Symlinks, Entrypoint, Cmd, User and Env make an
	// image from files.
	Files      []ImageFile
	Dirs       []ImageDir
	Trees      []ImageTree
	Symlinks   map[string]string
	Entrypoint []string
	Cmd        []string
	User       string
	Env        []string
	// Labels are added to the image's config: the same files under other
	// labels are an image with a digest of its own.
	Labels map[string]string
}

// ImageFile is a file of an Image: Src on this machine (or Data, its
// content), Dst in the image.
type ImageFile struct {
	Src  string `json:"src,omitempty"`
	Data string `json:"data,omitempty"`
	Dst  string `json:"dst"`
	Mode int64  `json:"mode,omitempty"`
}

// ImageDir is an empty directory of an Image.
type ImageDir struct {
	Dst  string `json:"dst"`
	Mode int64  `json:"mode,omitempty"`
}

// ImageTree is a directory of this machine copied whole into an Image.
type ImageTree struct {
	Src string `json:"src"`
	Dst string `json:"dst"`
}

// Image references the node serves by default.
const (
	// FlagdImage is flagd's published image, which admission injects by
	// default, served from the static flagd that `make realclients` builds.
	// Its entrypoint and user are those of flagd's own image.
	FlagdImage = "ghcr.io/open-feature/flagd:v0.16.0"
	// BusyboxImage is a shell and its tools (wget, nslookup, sleep) from
	// Debian's busybox-static, for client Pods.
	BusyboxImage = "docker.io/library/busybox:1.36"
	// SDKClientImage runs test/realclients/sdkclient: the OpenFeature Go SDK
	// with flagd's provider, an application evaluating in-process.
	SDKClientImage = "localhost:5000/flagplane/sdkclient:dev"
)

// defaultImages are the images every node serves: the sandbox, flagd, a
// shell, and the Go SDK client.
func defaultImages(binDir string) []Image {
	return []Image{
		{Ref: PauseImage, Files: []ImageFile{{Src: filepath.Join(binDir, "realnode", "pause"), Dst: "/pause"}}, Entrypoint: []string{"/pause"}, User: "65535:65535"},
		FlagdAt(FlagdImage, binDir),
		busyboxImage(BusyboxImage),
		// config/samples and the OpenFeature Operator's manifests name these.
		busyboxImage("docker.io/library/busybox:1.37"),
		busyboxImage("docker.io/library/busybox:latest"),
		{Ref: SDKClientImage, Files: []ImageFile{{Src: filepath.Join(binDir, "flagplane-sdkclient"), Dst: "/sdkclient"}}, Entrypoint: []string{"/sdkclient"}, User: "65532:65532"},
	}
}

// FlagdAt is the flagd that `make realclients` builds (v0.16.0, the one
// release the module proxy serves) under ref, with the entrypoint and user
// of flagd's own image: suites whose manifests name flagd by another tag
// run v0.16.0 under it.
func FlagdAt(ref, binDir string) Image {
	return Image{Ref: ref, Files: []ImageFile{{Src: filepath.Join(binDir, "flagd"), Dst: "/flagd-build"}},
		Entrypoint: []string{"/flagd-build"}, User: "65532:65532"}
}

// BusyboxAt is the busybox image under another reference, for suites whose
// manifests name busybox by another tag.
func BusyboxAt(ref string) Image { return busyboxImage(ref) }

func busyboxImage(ref string) Image {
	const bin = "/bin/busybox"
	im := Image{Ref: ref, Files: []ImageFile{{Src: bin, Dst: bin}}, Cmd: []string{"sh"}, Symlinks: map[string]string{}}
	out, err := exec.Command(bin, "--list").Output()
	if err != nil {
		return im // writeImages reports the missing binary
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" {
			im.Symlinks["/bin/"+applet] = "busybox"
		}
	}
	// /etc/passwd and /etc/group are not needed: Pods give numeric users.
	return im
}
