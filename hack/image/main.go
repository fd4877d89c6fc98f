// Command image builds the manager's OCI image from a static binary, without
// a container engine or a base image: one layer holding the binary on an
// empty base, run as 65532:65532 (non-root), with the OCI labels (and the
// same manifest annotations) that say what it is. It writes an OCI image
// layout directory, which `crane push`, `skopeo copy oci:` and `podman load`
// read, and optionally a docker-style tarball for `docker load`; it prints
// the image digest.
//
// The image is reproducible: every timestamp is -created (the commit time,
// `make image` passes it), the layer's tar headers carry no owner names or
// access times, and gzip output depends on its input only. The same binary
// gives the same digest.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// nonRoot is the user and group the image runs as: distroless' "nonroot".
const nonRoot = "65532:65532"

type options struct {
	binary     string
	entrypoint string
	ref        string
	version    string
	revision   string
	source     string
	created    int64
	goos       string
	goarch     string
	out        string
	tarball    string
	labels     keyValues
}

func main() {
	var o options
	flag.StringVar(&o.binary, "binary", "", "the static binary to put into the image (required)")
	flag.StringVar(&o.entrypoint, "entrypoint", "/manager", "path of the binary in the image, its entrypoint")
	flag.StringVar(&o.ref, "name", "flagplane:dev", "image reference, <registry>/flagplane:<tag>; its tag names the image in the layout")
	flag.StringVar(&o.version, "version", "dev", "org.opencontainers.image.version")
	flag.StringVar(&o.revision, "revision", "", "org.opencontainers.image.revision (the commit)")
	flag.StringVar(&o.source, "source", "", "org.opencontainers.image.source")
	flag.Int64Var(&o.created, "created", 0, "creation time, in seconds since the epoch (SOURCE_DATE_EPOCH); every timestamp in the image is this one")
	flag.StringVar(&o.goos, "os", "linux", "the binary's operating system")
	flag.StringVar(&o.goarch, "arch", "amd64", "the binary's architecture")
	flag.StringVar(&o.out, "o", "", "OCI image layout directory to write (replaced; required)")
	flag.StringVar(&o.tarball, "tarball", "", "also write a docker-style tarball here, for `docker load`")
	flag.Var(&o.labels, "label", "a further label, key=value (repeatable)")
	flag.Parse()
	digest, err := build(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Println(digest)
}

func build(o options) (string, error) {
	if o.binary == "" || o.out == "" {
		return "", errors.New("-binary and -o are required")
	}
	ref, err := name.NewTag(o.ref)
	if err != nil {
		return "", fmt.Errorf("-name %q: %w", o.ref, err)
	}
	created := time.Unix(o.created, 0).UTC()

	layer, err := binaryLayer(o.binary, strings.TrimPrefix(path.Clean(o.entrypoint), "/"), created)
	if err != nil {
		return "", err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "make image: " + path.Clean(o.entrypoint),
			Comment:   "the static manager binary on an empty base",
		},
	})
	if err != nil {
		return "", fmt.Errorf("appending the layer: %w", err)
	}

	labels := map[string]string{
		"org.opencontainers.image.title":       "flagplane",
		"org.opencontainers.image.description": "flagplane's manager: delivers OpenFeature flags (flagd) to Kubernetes workloads",
		"org.opencontainers.image.version":     o.version,
		"org.opencontainers.image.created":     created.Format(time.RFC3339),
	}
	if o.revision != "" {
		labels["org.opencontainers.image.revision"] = o.revision
	}
	if o.source != "" {
		labels["org.opencontainers.image.source"] = o.source
	}
	for k, v := range o.labels {
		labels[k] = v
	}

	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = o.goos, o.goarch
	cf.Created = v1.Time{Time: created}
	cf.Config.Entrypoint = []string{path.Clean(o.entrypoint)}
	cf.Config.User = nonRoot
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = labels
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return "", fmt.Errorf("writing the image config: %w", err)
	}
	// The labels again as manifest annotations, where registries and
	// tools that do not read the config look for them.
	img = mutate.Annotations(img, labels).(v1.Image)

	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	if err := os.RemoveAll(o.out); err != nil {
		return "", err
	}
	p, err := layout.Write(o.out, empty.Index)
	if err != nil {
		return "", fmt.Errorf("writing the OCI layout %s: %w", o.out, err)
	}
	platform := v1.Platform{OS: o.goos, Architecture: o.goarch}
	if err := p.AppendImage(img, layout.WithPlatform(platform), layout.WithAnnotations(map[string]string{
		// The tag, as the OCI layout names images (skopeo oci:DIR:TAG), and
		// the whole reference, as containerd and podman name them.
		"org.opencontainers.image.ref.name": ref.TagStr(),
		"io.containerd.image.name":          o.ref,
	})); err != nil {
		return "", fmt.Errorf("writing the image into %s: %w", o.out, err)
	}
	if o.tarball != "" {
		if err := tarball.WriteToFile(o.tarball, ref, img); err != nil {
			return "", fmt.Errorf("writing %s: %w", o.tarball, err)
		}
	}
	return digest.String(), nil
}

// binaryLayer is a layer holding the file at src as dst (mode 0755, owned
// by root, as a COPY would give it), with every timestamp at created.
func binaryLayer(src, dst string, created time.Time) (v1.Layer, error) {
	bin, err := os.ReadFile(src)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     dst,
		Mode:     0o755,
		Size:     int64(len(bin)),
		ModTime:  created,
		Format:   tar.FormatUSTAR,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// keyValues is a repeatable key=value flag.
type keyValues map[string]string

func (kv *keyValues) String() string { return fmt.Sprint(map[string]string(*kv)) }

func (kv *keyValues) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not key=value", s)
	}
	if *kv == nil {
		*kv = keyValues{}
	}
	(*kv)[k] = v
	return nil
}
