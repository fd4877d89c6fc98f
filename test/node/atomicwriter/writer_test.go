package atomicwriter_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/test/node/atomicwriter"
)

func TestWriteLayoutAndSwap(t *testing.T) {
	g := NewWithT(t)
	dir := filepath.Join(t.TempDir(), "vol")
	w, err := atomicwriter.New(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w.Current()).To(BeEmpty())

	changed, err := w.Write(atomicwriter.Payload{
		"flags.json": {Data: []byte(`{"v":1}`)},
		"sub/nested": {Data: []byte("n"), Mode: 0o600},
		"gone-later": {Data: []byte("x")},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(BeTrue())
	first := w.Current()
	g.Expect(first).To(HavePrefix("..20"))

	g.Expect(os.Readlink(filepath.Join(dir, "flags.json"))).To(Equal("..data/flags.json"))
	g.Expect(os.Readlink(filepath.Join(dir, "sub"))).To(Equal("..data/sub"))
	g.Expect(os.ReadFile(filepath.Join(dir, "flags.json"))).To(BeEquivalentTo(`{"v":1}`))
	info, err := os.Stat(filepath.Join(dir, "sub", "nested"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)))
	info, err = os.Stat(filepath.Join(dir, "flags.json"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o644)))

	// An equal payload writes nothing.
	changed, err = w.Write(atomicwriter.Payload{
		"flags.json": {Data: []byte(`{"v":1}`)},
		"sub/nested": {Data: []byte("n"), Mode: 0o600},
		"gone-later": {Data: []byte("x")},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(BeFalse())
	g.Expect(w.Current()).To(Equal(first))

	// A reader holding the old file keeps reading the old content.
	held, err := os.Open(filepath.Join(dir, "flags.json"))
	g.Expect(err).NotTo(HaveOccurred())
	defer held.Close()

	changed, err = w.Write(atomicwriter.Payload{"flags.json": {Data: []byte(`{"v":2}`)}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(BeTrue())
	g.Expect(w.Current()).NotTo(Equal(first))
	g.Expect(os.ReadFile(filepath.Join(dir, "flags.json"))).To(BeEquivalentTo(`{"v":2}`))
	g.Expect(filepath.Join(dir, "gone-later")).NotTo(BeAnExistingFile())
	_, err = os.Lstat(filepath.Join(dir, "sub"))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the link of a removed path is removed")
	g.Expect(filepath.Join(dir, first)).NotTo(BeADirectory(), "the old version is removed")
	old := make([]byte, 16)
	n, _ := held.Read(old)
	g.Expect(string(old[:n])).To(Equal(`{"v":1}`))

	entries, err := os.ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	g.Expect(names).To(ConsistOf("..data", w.Current(), "flags.json"))
}

func TestWriteRefusesEscapingPaths(t *testing.T) {
	for _, p := range []string{"", "/abs", "../up", "a/../../b", "..data", "a//b", "a/"} {
		t.Run(strings.ReplaceAll(p, "/", "_"), func(t *testing.T) {
			g := NewWithT(t)
			w, err := atomicwriter.New(t.TempDir())
			g.Expect(err).NotTo(HaveOccurred())
			_, err = w.Write(atomicwriter.Payload{p: {Data: []byte("x")}})
			g.Expect(err).To(HaveOccurred())
			g.Expect(w.Current()).To(BeEmpty())
		})
	}
}

func TestWriteRefusesFileAndDirectory(t *testing.T) {
	g := NewWithT(t)
	w, err := atomicwriter.New(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	_, err = w.Write(atomicwriter.Payload{"a": {Data: []byte("x")}, "a/b": {Data: []byte("y")}})
	g.Expect(err).To(MatchError(ContainSubstring(`"a" is a file and the directory`)))
}

func TestWriteEmptyPayload(t *testing.T) {
	g := NewWithT(t)
	w, err := atomicwriter.New(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	changed, err := w.Write(atomicwriter.Payload{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(BeTrue(), "an optional, missing ConfigMap still gets its ..data")
	g.Expect(w.Current()).NotTo(BeEmpty())
	changed, err = w.Write(nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(BeFalse())
}
