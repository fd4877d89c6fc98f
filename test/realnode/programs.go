package realnode

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Images of real programs from Debian's packages: a dynamically linked
// binary with the shared libraries ldd lists, so that a manifest naming
// nginx or curl runs nginx or curl, not a stand-in.

// Image references of the OpenFeature Operator's e2e suite, which its
// manifests name; the node serves the real programs under them.
const (
	NginxImage = "docker.io/library/nginx:stable-alpine"
	CurlImage  = "docker.io/curlimages/curl:8.11.1"
)

// NginxBinary is where `make realnode` extracts Debian's nginx (from its
// package, not installed on this machine: no service starts).
func NginxBinary(binDir string) string {
	return filepath.Join(binDir, "realnode", "nginx", "usr", "sbin", "nginx")
}

// CurlBinary is Debian's curl, installed by `make realnode`.
const CurlBinary = "/usr/bin/curl"

// WithLibraries returns files and the shared libraries they load, by ldd,
// each under the path ldd names (the dynamic loader included), read
// through its symlinks.
func WithLibraries(files ...ImageFile) ([]ImageFile, error) {
	out := slices.Clone(files)
	seen := map[string]bool{}
	for _, f := range files {
		seen[f.Dst] = true
	}
	for _, f := range files {
		libs, err := sharedLibraries(f.Src)
		if err != nil {
			return nil, err
		}
		for _, lib := range libs {
			if seen[lib] {
				continue
			}
			seen[lib] = true
			real, err := filepath.EvalSymlinks(lib)
			if err != nil {
				return nil, fmt.Errorf("library %s of %s: %w", lib, f.Src, err)
			}
			out = append(out, ImageFile{Src: real, Dst: lib, Mode: 0o755})
		}
	}
	return out, nil
}

// sharedLibraries are the absolute paths ldd prints for binary.
func sharedLibraries(binary string) ([]string, error) {
	out, err := exec.Command("ldd", binary).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %v: %s", binary, err, strings.TrimSpace(string(out)))
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 3 && fields[1] == "=>":
			if fields[2] == "not" {
				return nil, fmt.Errorf("ldd %s: %s", binary, strings.TrimSpace(line))
			}
			if strings.HasPrefix(fields[2], "/") {
				libs = append(libs, fields[2])
			}
		case len(fields) >= 1 && strings.HasPrefix(fields[0], "/"):
			libs = append(libs, fields[0]) // the dynamic loader
		}
	}
	return libs, nil
}

// passwd and group name the users programs look up: root, nobody (nginx's
// workers) and curl_user (the curl image's).
const (
	etcPasswd = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\ncurl_user:x:100:101:curl_user:/home/curl_user:/bin/sh\n"
	etcGroup  = "root:x:0:\nnogroup:x:65534:\ncurl_group:x:101:\n"
)

// NginxAt is Debian's nginx under ref, run as the nginx image runs it:
// `nginx -g 'daemon off;'` as root with workers as nobody, the
// configuration in /etc/nginx, logs to the container's output.
func NginxAt(ref, binDir string) (Image, error) {
	files, err := WithLibraries(ImageFile{Src: NginxBinary(binDir), Dst: "/usr/sbin/nginx"})
	if err != nil {
		return Image{}, fmt.Errorf("image %s: %w (run `make realnode`)", ref, err)
	}
	files = append(files,
		ImageFile{Data: etcPasswd, Dst: "/etc/passwd", Mode: 0o644},
		ImageFile{Data: etcGroup, Dst: "/etc/group", Mode: 0o644})
	return Image{
		Ref:   ref,
		Files: files,
		Dirs: []ImageDir{{Dst: "/etc/nginx"}, {Dst: "/var/lib/nginx"}, {Dst: "/var/log/nginx"},
			{Dst: "/run"}, {Dst: "/var/lock"}, {Dst: "/tmp", Mode: 0o1777}},
		Symlinks: map[string]string{"/var/log/nginx/access.log": "/dev/stdout", "/var/log/nginx/error.log": "/dev/stderr"},
		Cmd:      []string{"/usr/sbin/nginx", "-g", "daemon off;"},
	}, nil
}

// curlEntrypoint runs its arguments, or curl with them when the first is
// an option or no program: as the curl image's entrypoint does.
const curlEntrypoint = `#!/bin/sh
set -e
if [ "${1#-}" != "$1" ] || [ -z "$(command -v "$1")" ]; then
  set -- curl "$@"
fi
exec "$@"
`

// CurlAt is Debian's curl under ref with busybox's shell and tools, run as
// the curl image runs it: as curl_user, through an entrypoint that runs
// its arguments.
func CurlAt(ref string) (Image, error) {
	files, err := WithLibraries(ImageFile{Src: CurlBinary, Dst: "/usr/bin/curl"})
	if err != nil {
		return Image{}, fmt.Errorf("image %s: %w (run `make realnode`)", ref, err)
	}
	bb := busyboxImage(ref)
	files = append(files, bb.Files...)
	files = append(files,
		ImageFile{Data: etcPasswd, Dst: "/etc/passwd", Mode: 0o644},
		ImageFile{Data: etcGroup, Dst: "/etc/group", Mode: 0o644},
		ImageFile{Data: curlEntrypoint, Dst: "/entrypoint.sh", Mode: 0o755})
	return Image{
		Ref:        ref,
		Files:      files,
		Dirs:       []ImageDir{{Dst: "/tmp", Mode: 0o1777}, {Dst: "/home/curl_user"}},
		Symlinks:   bb.Symlinks,
		Entrypoint: []string{"/entrypoint.sh"},
		Cmd:        []string{"curl"},
		User:       "100:101",
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	}, nil
}
