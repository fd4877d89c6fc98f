package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

const (
	// testImage and testVersion name the image the test builds; the version
	// is given so that the label and the binary's answer can be checked.
	testImage   = "flagplane:image-test"
	testVersion = "v0.0.0-image-test"
	// created is the SOURCE_DATE_EPOCH given to both builds.
	created = 1767225600 // 2026-01-01T00:00:00Z
)

// OCI image layout, index, manifest and config: the fields the test reads.
type (
	descriptor struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Annotations map[string]string `json:"annotations"`
		Platform    *struct {
			OS           string `json:"os"`
			Architecture string `json:"architecture"`
		} `json:"platform"`
	}
	index struct {
		SchemaVersion int          `json:"schemaVersion"`
		MediaType     string       `json:"mediaType"`
		Manifests     []descriptor `json:"manifests"`
	}
	manifest struct {
		SchemaVersion int               `json:"schemaVersion"`
		MediaType     string            `json:"mediaType"`
		Config        descriptor        `json:"config"`
		Layers        []descriptor      `json:"layers"`
		Annotations   map[string]string `json:"annotations"`
	}
	imageConfig struct {
		Created      time.Time `json:"created"`
		OS           string    `json:"os"`
		Architecture string    `json:"architecture"`
		Config       struct {
			User       string            `json:"User"`
			Entrypoint []string          `json:"Entrypoint"`
			Cmd        []string          `json:"Cmd"`
			Env        []string          `json:"Env"`
			WorkingDir string            `json:"WorkingDir"`
			Labels     map[string]string `json:"Labels"`
		} `json:"config"`
		RootFS struct {
			Type    string   `json:"type"`
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
		History []struct {
			Created time.Time `json:"created"`
		} `json:"history"`
	}
)

// makeImage runs `make image` into dir and returns the digest it printed.
func makeImage(t *testing.T, dir string) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "-C", root, "--no-print-directory", "image",
		"IMAGE="+testImage, "IMAGE_DIR="+dir, "VERSION="+testVersion, fmt.Sprintf("SOURCE_DATE_EPOCH=%d", created))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	digest, err := os.ReadFile(dir + ".digest")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(digest))
}

// blob reads a blob of the layout at dir and checks it against its descriptor.
func blob(g Gomega, dir string, d descriptor) []byte {
	algo, hexDigest, ok := strings.Cut(d.Digest, ":")
	g.Expect(ok).To(BeTrue(), d.Digest)
	g.Expect(algo).To(Equal("sha256"))
	b, err := os.ReadFile(filepath.Join(dir, "blobs", algo, hexDigest))
	g.Expect(err).NotTo(HaveOccurred())
	sum := sha256.Sum256(b)
	g.Expect(hex.EncodeToString(sum[:])).To(Equal(hexDigest), "the blob's content is what its name says")
	g.Expect(int64(len(b))).To(Equal(d.Size), "the descriptor's size of %s", d.Digest)
	return b
}

func TestImage(t *testing.T) {
	g := NewWithT(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "first")

	digest := makeImage(t, dir)
	t.Run("is reproducible: built again, it has the same digest", func(t *testing.T) {
		NewWithT(t).Expect(makeImage(t, filepath.Join(tmp, "second"))).To(Equal(digest))
	})

	// The OCI image layout: oci-layout, index.json, blobs/sha256/...
	layoutFile, err := os.ReadFile(filepath.Join(dir, "oci-layout"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(layoutFile)).To(MatchJSON(`{"imageLayoutVersion":"1.0.0"}`))
	var idx index
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(b, &idx)).To(Succeed())
	g.Expect(idx.Manifests).To(HaveLen(1))
	md := idx.Manifests[0]
	g.Expect(md.Digest).To(Equal(digest), "the digest make image printed is the manifest's")
	g.Expect(md.MediaType).To(Equal("application/vnd.oci.image.manifest.v1+json"))
	g.Expect(md.Annotations).To(HaveKeyWithValue("org.opencontainers.image.ref.name", "image-test"))
	g.Expect(md.Annotations).To(HaveKeyWithValue("io.containerd.image.name", testImage))
	g.Expect(md.Platform).NotTo(BeNil())
	g.Expect(md.Platform.OS).To(Equal("linux"))

	var m manifest
	g.Expect(json.Unmarshal(blob(g, dir, md), &m)).To(Succeed())
	g.Expect(m.SchemaVersion).To(Equal(2))
	g.Expect(m.MediaType).To(Equal("application/vnd.oci.image.manifest.v1+json"))
	g.Expect(m.Config.MediaType).To(Equal("application/vnd.oci.image.config.v1+json"))
	g.Expect(m.Layers).To(HaveLen(1), "one layer, the binary, on an empty base")
	g.Expect(m.Layers[0].MediaType).To(Equal("application/vnd.oci.image.layer.v1.tar+gzip"))
	g.Expect(m.Annotations).To(HaveKeyWithValue("org.opencontainers.image.version", testVersion))

	var cfg imageConfig
	g.Expect(json.Unmarshal(blob(g, dir, m.Config), &cfg)).To(Succeed())
	createdAt := time.Unix(created, 0).UTC()
	t.Run("runs the manager as non-root, with the OCI labels", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(cfg.OS).To(Equal("linux"))
		g.Expect(cfg.Architecture).To(Equal(md.Platform.Architecture))
		g.Expect(cfg.Config.Entrypoint).To(Equal([]string{"/manager"}))
		g.Expect(cfg.Config.Cmd).To(BeEmpty())
		g.Expect(cfg.Config.User).To(Equal("65532:65532"), "the restricted Pod Security level's runAsNonRoot needs a numeric non-root user")
		g.Expect(cfg.Config.Labels).To(And(
			HaveKeyWithValue("org.opencontainers.image.title", "flagplane"),
			HaveKeyWithValue("org.opencontainers.image.version", testVersion),
			HaveKeyWithValue("org.opencontainers.image.created", "2026-01-01T00:00:00Z"),
			HaveKeyWithValue("org.opencontainers.image.revision", MatchRegexp(`^[0-9a-f]{40}$`)),
			HaveKey("org.opencontainers.image.source"),
			HaveKey("org.opencontainers.image.description"),
		))
		g.Expect(cfg.Created).To(BeTemporally("==", createdAt), "pinned, for the same digest every time")
		for _, h := range cfg.History {
			g.Expect(h.Created).To(BeTemporally("==", createdAt))
		}
	})

	// The layer: one file, /manager.
	layer := blob(g, dir, m.Layers[0])
	zr, err := gzip.NewReader(bytes.NewReader(layer))
	g.Expect(err).NotTo(HaveOccurred())
	diff := sha256.New()
	tr := tar.NewReader(io.TeeReader(zr, diff))
	hdr, err := tr.Next()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hdr.Name).To(Equal("manager"))
	g.Expect(hdr.Typeflag).To(Equal(byte(tar.TypeReg)))
	g.Expect(hdr.Mode).To(Equal(int64(0o755)))
	g.Expect(hdr.Uid).To(Equal(0))
	g.Expect(hdr.Gid).To(Equal(0))
	g.Expect(hdr.ModTime).To(BeTemporally("==", createdAt))
	binary := filepath.Join(tmp, "manager")
	f, err := os.OpenFile(binary, os.O_CREATE|os.O_WRONLY, 0o755)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = io.Copy(f, tr)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Close()).To(Succeed())
	_, err = tr.Next()
	g.Expect(err).To(Equal(io.EOF), "nothing but the binary")
	_, err = io.Copy(io.Discard, zr) // the rest of the tar stream (its end blocks), for the diff ID
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.RootFS.Type).To(Equal("layers"))
	g.Expect(cfg.RootFS.DiffIDs).To(Equal([]string{"sha256:" + hex.EncodeToString(diff.Sum(nil))}),
		"the config's diff ID is the digest of the uncompressed layer")

	t.Run("holds a static binary", func(t *testing.T) {
		g := NewWithT(t)
		ef, err := elf.Open(binary)
		g.Expect(err).NotTo(HaveOccurred())
		defer ef.Close()
		for _, p := range ef.Progs {
			g.Expect(p.Type).NotTo(Equal(elf.PT_INTERP), "no dynamic loader: the image has none")
		}
		libs, err := ef.ImportedLibraries()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(libs).To(BeEmpty())
	})

	t.Run("runs the binary taken from its layer", func(t *testing.T) {
		if runtime.GOOS != "linux" || runtime.GOARCH != cfg.Architecture {
			t.Skipf("the image is linux/%s, this is %s/%s", cfg.Architecture, runtime.GOOS, runtime.GOARCH)
		}
		g := NewWithT(t)
		out, err := exec.Command(binary, "--version").CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "%s", out)
		g.Expect(string(out)).To(Equal("flagplane manager " + testVersion + "\n"))
		out, err = exec.Command(binary, "--help").CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "%s", out)
		g.Expect(string(out)).To(And(ContainSubstring("-leader-elect"), ContainSubstring("-webhook-certificates")))
	})
}
