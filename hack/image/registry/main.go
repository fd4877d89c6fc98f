// Command registry is the image registry of the real test node
// (test/realnode): an OCI distribution registry (go-containerregistry's
// pkg/registry, which speaks the pull and push protocol containerd uses)
// that starts with the images the node needs already in it, built here
// from local binaries and OCI layouts. containerd reaches it as the mirror
// of every upstream registry (its hosts.toml), so that manifests name
// images as users write them (ghcr.io/open-feature/flagd:v0.16.0) and
// imagePullPolicy: Always pulls for real, over HTTP, from this machine.
//
//	registry -listen 127.0.0.1:5000 -images images.json
//
// images.json is a list of images; each is either an OCI layout (`make
// image` writes one) or files put together on an empty base:
//
//	[{"ref": "ghcr.io/open-feature/flagd:v0.16.0",
//	  "files": [{"src": "bin/flagd", "dst": "/flagd-build"}],
//	  "entrypoint": ["/flagd-build"], "user": "65532:65532"},
//	 {"ref": "ghcr.io/flagplane/flagplane:0.1.0", "layout": "dist/image"}]
//
// Besides files copied from this machine, an image may hold files given
// inline ("data"), empty directories ("dirs", e.g. a writable /tmp) and
// whole directory trees ("trees", e.g. an application's node_modules).
//
// A repository is stored under its path without the registry host
// (open-feature/flagd), which is what a mirror is asked for. Labels, when
// given, are added to the image's config, which gives an image of the same
// binaries a digest of its own (an upgrade to "a new image").
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// spec is one image of images.json.
type spec struct {
	Ref        string            `json:"ref"`
	Layout     string            `json:"layout,omitempty"`
	Files      []file            `json:"files,omitempty"`
	Dirs       []dir             `json:"dirs,omitempty"`
	Trees      []tree            `json:"trees,omitempty"`
	Symlinks   map[string]string `json:"symlinks,omitempty"`
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Cmd        []string          `json:"cmd,omitempty"`
	User       string            `json:"user,omitempty"`
	Env        []string          `json:"env,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
}

// file is one file of an image: Src on this machine, or Data inline.
type file struct {
	Src  string `json:"src,omitempty"`
	Data string `json:"data,omitempty"`
	Dst  string `json:"dst"`
	Mode int64  `json:"mode,omitempty"`
}

// dir is an empty directory of an image.
type dir struct {
	Dst  string `json:"dst"`
	Mode int64  `json:"mode,omitempty"`
}

// tree is a directory of this machine copied into an image at Dst, with
// its files' modes and its symlinks.
type tree struct {
	Src string `json:"src"`
	Dst string `json:"dst"`
}

func main() {
	listen := flag.String("listen", "127.0.0.1:5000", "address to serve the registry on")
	images := flag.String("images", "", "JSON file listing the images to load (see the package doc)")
	flag.Parse()
	if err := run(*listen, *images); err != nil {
		log.Fatalf("registry: %v", err)
	}
}

func run(listen, imagesFile string) error {
	var specs []spec
	if imagesFile != "" {
		data, err := os.ReadFile(imagesFile)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &specs); err != nil {
			return fmt.Errorf("reading %s: %w", imagesFile, err)
		}
	}
	blobs := &blobStore{m: map[v1.Hash][]byte{}}
	handler := registry.New(registry.WithBlobHandler(blobs), registry.Logger(log.New(io.Discard, "", 0)))
	for _, s := range specs {
		digest, err := load(handler, blobs, s)
		if err != nil {
			return fmt.Errorf("loading %s: %w", s.Ref, err)
		}
		fmt.Printf("loaded %s %s\n", s.Ref, digest)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
		<-sigs
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// load builds or reads the image of s and stores it: its blobs directly,
// its manifest through the registry's own PUT, under the repository path
// that a mirror is asked for.
func load(h http.Handler, blobs *blobStore, s spec) (string, error) {
	ref, err := name.NewTag(s.Ref)
	if err != nil {
		return "", err
	}
	img, err := image(s)
	if err != nil {
		return "", err
	}
	if len(s.Labels) > 0 {
		cf, err := img.ConfigFile()
		if err != nil {
			return "", err
		}
		cf = cf.DeepCopy()
		if cf.Config.Labels == nil {
			cf.Config.Labels = map[string]string{}
		}
		for k, v := range s.Labels {
			cf.Config.Labels[k] = v
		}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return "", err
		}
	}
	layers, err := img.Layers()
	if err != nil {
		return "", err
	}
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			return "", err
		}
		data, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			return "", err
		}
		blobs.put(v1.Hash{Algorithm: "sha256", Hex: sha256Hex(data)}, data)
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return "", err
	}
	blobs.put(v1.Hash{Algorithm: "sha256", Hex: sha256Hex(cfg)}, cfg)
	manifest, err := img.RawManifest()
	if err != nil {
		return "", err
	}
	mt, err := img.MediaType()
	if err != nil {
		return "", err
	}
	repo := ref.RepositoryStr()
	req := httptest.NewRequest(http.MethodPut, "/v2/"+repo+"/manifests/"+ref.TagStr(), bytes.NewReader(manifest))
	req.Header.Set("Content-Type", string(mt))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		return "", fmt.Errorf("storing the manifest: %d %s", rec.Code, rec.Body.String())
	}
	digest, err := img.Digest()
	return digest.String(), err
}

func image(s spec) (v1.Image, error) {
	if s.Layout != "" {
		p, err := layout.FromPath(s.Layout)
		if err != nil {
			return nil, err
		}
		idx, err := p.ImageIndex()
		if err != nil {
			return nil, err
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return nil, err
		}
		if len(im.Manifests) != 1 {
			return nil, fmt.Errorf("%s holds %d images, want 1", s.Layout, len(im.Manifests))
		}
		return idx.Image(im.Manifests[0].Digest)
	}
	files, symlinks, err := expandTrees(s)
	if err != nil {
		return nil, err
	}
	layer, err := filesLayer(files, s.Dirs, symlinks)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer}); err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint, cf.Config.Cmd = s.Entrypoint, s.Cmd
	cf.Config.User, cf.Config.Env, cf.Config.WorkingDir = s.User, s.Env, "/"
	return mutate.ConfigFile(img, cf)
}

// filesLayer is one layer with the files (and their parent directories)
// and symlinks, owned by root, with a fixed timestamp.
func filesLayer(files []file, emptyDirs []dir, symlinks map[string]string) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	mkdirs := func(p string) error {
		var parents []string
		for d := path.Dir(p); d != "/" && d != "." && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
			dirs[d] = true
		}
		for i := len(parents) - 1; i >= 0; i-- {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(parents[i], "/") + "/", Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
				return err
			}
		}
		return nil
	}
	for _, d := range emptyDirs {
		clean := path.Clean(d.Dst)
		if err := mkdirs(clean); err != nil {
			return nil, err
		}
		mode := d.Mode
		if mode == 0 {
			mode = 0o755
		}
		if !dirs[clean] {
			dirs[clean] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(clean, "/") + "/", Mode: mode, ModTime: time.Unix(0, 0)}); err != nil {
				return nil, err
			}
		}
	}
	for _, f := range files {
		data := []byte(f.Data)
		if f.Src != "" {
			var err error
			if data, err = os.ReadFile(f.Src); err != nil {
				return nil, err
			}
		}
		if err := mkdirs(f.Dst); err != nil {
			return nil, err
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.Dst, "/"), Mode: mode, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	links := make([]string, 0, len(symlinks))
	for l := range symlinks {
		links = append(links, l)
	}
	sort.Strings(links)
	for _, l := range links {
		if err := mkdirs(l); err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(l, "/"), Linkname: symlinks[l], Mode: 0o777, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// expandTrees lists the files and symlinks of s's trees after its own
// files and symlinks, in a stable order.
func expandTrees(s spec) ([]file, map[string]string, error) {
	files := slices.Clone(s.Files)
	symlinks := maps.Clone(s.Symlinks)
	if symlinks == nil {
		symlinks = map[string]string{}
	}
	for _, t := range s.Trees {
		err := filepath.WalkDir(t.Src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(t.Src, p)
			if err != nil {
				return err
			}
			dst := path.Join(t.Dst, filepath.ToSlash(rel))
			switch {
			case d.Type()&fs.ModeSymlink != 0:
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				symlinks[dst] = target
			case d.Type().IsRegular():
				info, err := d.Info()
				if err != nil {
					return err
				}
				files = append(files, file{Src: p, Dst: dst, Mode: int64(info.Mode().Perm())})
			}
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("tree %s: %w", t.Src, err)
		}
	}
	return files, symlinks, nil
}

// blobStore keeps blobs in memory; pushes (crane push) add to it too.
type blobStore struct {
	mu sync.Mutex
	m  map[v1.Hash][]byte
}

var _ registry.BlobPutHandler = (*blobStore)(nil)

func (b *blobStore) put(h v1.Hash, data []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.m[h] = data
}

func (b *blobStore) Stat(_ context.Context, _ string, h v1.Hash) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, ok := b.m[h]
	if !ok {
		return 0, registry.ErrNotFound
	}
	return int64(len(data)), nil
}

func (b *blobStore) Get(_ context.Context, _ string, h v1.Hash) (io.ReadCloser, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, ok := b.m[h]
	if !ok {
		return nil, registry.ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (b *blobStore) Put(_ context.Context, _ string, h v1.Hash, rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	b.put(h, data)
	return nil
}

func sha256Hex(data []byte) string {
	h, _, _ := v1.SHA256(bytes.NewReader(data))
	return h.Hex
}
