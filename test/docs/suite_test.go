package docs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/operator"
)

func TestDocs(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Docs: every command README.md and docs/*.md show")
}

// environment is where the docs' commands run.
type environment struct {
	// root is the repository.
	root string
	// scratch is the folder commands run in: a link to every entry of
	// root's top level, and whatever the commands write.
	scratch string
	// bin holds flagplane and kubectl-flagplane, built for the suite, and
	// links to bin/kubectl and bin/helm; it comes first on PATH.
	bin string
	// home is HOME for the commands, so that nothing of the user's
	// (~/.kube, helm's settings) is read or written.
	home string
	// goEnv passes the Go caches on to make's `go env`.
	goEnv []string

	cp *controlplane.ControlPlane
}

var env = &environment{}

var _ = BeforeSuite(func(ctx SpecContext) {
	var err error
	env.root, err = filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())
	env.scratch, env.bin, env.home = GinkgoT().TempDir(), GinkgoT().TempDir(), GinkgoT().TempDir()

	entries, err := os.ReadDir(env.root)
	Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		// Not .git: a command that runs git there would take the scratch
		// folder for the repository's work tree.
		if e.Name() == ".git" {
			continue
		}
		Expect(os.Symlink(filepath.Join(env.root, e.Name()), filepath.Join(env.scratch, e.Name()))).To(Succeed())
	}

	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(env.bin, "flagplane"), "./cmd/flagplane")
	build.Dir = env.root
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go build ./cmd/flagplane:\n%s", out)
	Expect(os.Symlink("flagplane", filepath.Join(env.bin, "kubectl-flagplane"))).To(Succeed())
	for _, tool := range []string{"kubectl", "helm"} {
		if _, err := os.Stat(filepath.Join(env.root, "bin", tool)); err == nil {
			Expect(os.Symlink(filepath.Join(env.root, "bin", tool), filepath.Join(env.bin, tool))).To(Succeed())
		}
	}
	_, err = os.Stat(filepath.Join(env.bin, "kubectl"))
	Expect(err).NotTo(HaveOccurred(), "bin/kubectl is missing: run `make controlplane`")

	goEnv, err := exec.CommandContext(ctx, "go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	Expect(err).NotTo(HaveOccurred())
	for i, name := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		env.goEnv = append(env.goEnv, name+"="+strings.Split(string(goEnv), "\n")[i])
	}

	off, cluster, skipped := counts()
	AddReportEntry("commands the docs show", map[string]int{"offline": off, "against the cluster": cluster, "not runnable": skipped})
}, NodeTimeout(5*time.Minute))

// startCluster starts the demo's cluster: a control plane, the operator
// with its admission and sync server, and config/samples in namespace shop,
// applied as make demo applies them (the flag set and the source first, so
// that the first Pod is admitted with its sidecar).
func (e *environment) startCluster(ctx context.Context) {
	GinkgoHelper()
	var err error
	e.cp, err = controlplane.Start(ctx, controlplane.Options{
		RootDir: e.root, Log: GinkgoWriter,
		WebhookInstallOptions: operator.WebhookInstallOptions(e.root),
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(e.cp.Stop()).To(Succeed()) })

	op, err := operator.Start(ctx, e.cp, operator.Options{SyncServer: true, Dir: GinkgoT().TempDir()})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(op.Stop()).To(Succeed()) })

	// The docs name the namespace shop (NewNamespace would add a suffix).
	samples := filepath.Join(e.root, "config", "samples")
	e.kubectl("create", "namespace", "shop")
	Eventually(func() error {
		_, err := e.cp.Kubectl("get", "serviceaccount", "default", "-n", "shop")
		return err
	}).WithTimeout(30 * time.Second).Should(Succeed())
	e.kubectl("apply", "-n", "shop", "-f", filepath.Join(samples, "featureflag.yaml"), "-f", filepath.Join(samples, "featureflagsource.yaml"))
	e.kubectl("apply", "-n", "shop", "-f", filepath.Join(samples, "deployment.yaml"), "-f", filepath.Join(samples, "flagd.yaml"))
	e.kubectl("wait", "-n", "shop", "--for=condition=Ready", "--timeout=60s", "featureflag/shop-flags", "featureflagsource/shop")
}

func (e *environment) kubectl(args ...string) {
	GinkgoHelper()
	out, err := e.cp.Kubectl(args...)
	Expect(err).NotTo(HaveOccurred())
	_, _ = GinkgoWriter.Write([]byte(out))
}

// environ is the environment of a command: offline, KUBECONFIG names a
// file that does not exist, so that a command that needs a cluster fails.
func (e *environment) environ(cluster bool) []string {
	kubeconfig := filepath.Join(e.scratch, "no-cluster", "kubeconfig")
	if cluster {
		kubeconfig = e.cp.KubeconfigPath
	}
	path := []string{e.bin}
	if goBin, err := exec.LookPath("go"); err == nil {
		path = append(path, filepath.Dir(goBin))
	}
	path = append(path, "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
	return append([]string{
		"PATH=" + strings.Join(path, string(os.PathListSeparator)),
		"HOME=" + e.home,
		"KUBECONFIG=" + kubeconfig,
		"KUBERC=off",
		"LANG=C.UTF-8",
	}, e.goEnv...)
}
