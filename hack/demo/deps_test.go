package main

import (
	"os/exec"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestDemoLinksNoTestFramework: the demo is a command, and it starts the
// operator with test/operator, the suites' starter; neither it nor what it
// imports may pull in testing, Ginkgo or Gomega (their flags and init would
// become the demo's).
func TestDemoLinksNoTestFramework(t *testing.T) {
	g := NewWithT(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the demo's dependencies")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "go list -deps: %s", out)
	deps := strings.Fields(string(out))
	g.Expect(deps).To(ContainElement("github.com/flagplane/flagplane/test/operator"), "the demo starts the operator with test/operator")
	for _, forbidden := range []string{"testing", "github.com/onsi/ginkgo/v2", "github.com/onsi/gomega"} {
		g.Expect(deps).NotTo(ContainElement(forbidden))
	}
}
