package main

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// TestLateFile: what is logged before the operator's log file exists (the
// control plane starting) is in it, first, once it is opened.
func TestLateFile(t *testing.T) {
	g := NewWithT(t)
	l := &lateFile{}
	_, err := l.Write([]byte("control plane starting\n"))
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(t.TempDir(), "flagplane.log")
	g.Expect(l.open(path)).To(Succeed())
	_, err = l.Write([]byte("operator started\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.Close()).To(Succeed())
	_, err = l.Write([]byte("after the operator stopped\n"))
	g.Expect(err).NotTo(HaveOccurred(), "dropped, never an error to the logger")
	g.Expect(l.pending.Len()).To(BeZero(), "not kept either")
	b, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal("control plane starting\noperator started\n"))
}
