package docs

// Every command the docs show runs here. The convention the docs follow
// (README.md and docs/*.md; docs/development.md says it to writers):
//
//   - A command to run is shown in a fenced code block marked sh (or shell,
//     bash). Every line is a command, blank lines and # comments aside; a
//     line ending in \ continues on the next, and is joined to it with one
//     space.
//   - A command with its output is shown in a fenced block marked console.
//     A line starting with "$ " is a command; the lines after it, up to the
//     next command, are what it prints; a line "..." stands for lines left
//     out, and "..." within a line for text left out.
//   - No other code block (text, yaml, an indented block) is run, and none
//     may have a line starting with "$ ". Commands in running text (inline
//     code) are not run, but every Make target that inline code names
//     (`make demo`) must exist.
//
// Each command runs on its own (bash -o pipefail -c), in a scratch folder
// whose entries link to the repository's top level (so that files it
// writes stay there), with flagplane and kubectl-flagplane built from
// ./cmd/flagplane, and kubectl and helm from bin/, first on PATH:
//
//   - offline, with KUBECONFIG naming a file that does not exist: make (run
//     as make -n, which checks that the targets exist and prints their
//     recipes without running them), helm template and lint, kubectl
//     kustomize, kubectl plugin, source, and flagplane with --from-dir or
//     completion (see offline);
//   - every other command against the demo's cluster: a control plane of
//     test/controlplane with the operator of test/operator running (its
//     admission and its sync server) and config/samples applied to
//     namespace shop, as make demo has them, with KUBECONFIG pointing to it.
//
// The exit status must be 0, and each line of output a doc shows (blank
// lines and "..." aside) must appear, in order and spaces aside, in what
// the command prints (stdout and stderr), unless exampleOutput says why the
// output shown is only an example. A command that cannot run here is in
// notRunnable, with the reason. A command that fails and is not there fails
// its spec; an entry of either table that no doc shows any more fails too.
// A command shown several times runs once.

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// notRunnable are the commands the docs show that cannot run here, by their
// exact text, with the reason.
var notRunnable = map[string]string{
	"kubectl apply --server-side -k config/default":                                                                "installs flagplane into the user's cluster; test/install applies config/default, test/realinstall installs the chart on a real node",
	"helm install flagplane charts/flagplane":                                                                      "installs flagplane into the user's cluster; test/install and test/realinstall run helm install on the chart",
	"kubectl apply --server-side -k config/namespaced":                                                             "installs a team's manager into the user's cluster, in namespace team-a: its Deployment needs the image and a node that runs it",
	"kubectl apply --server-side -k config/namespaced/admission":                                                   "installs team-a's webhook configurations into the user's cluster, pointing at a manager that does not run here",
	"go run ./cmd/manager":                                                                                         "long-running: the operator, until stopped",
	"kubectl port-forward -n flagplane-system svc/flagplane-metrics 8443:8443":                                     "long-running, to the metrics Service of an installed manager",
	"TOKEN=$(kubectl create token prometheus -n monitoring)":                                                       "needs the ServiceAccount of the user's scraper, monitoring/prometheus",
	"flagplane topology --url https://127.0.0.1:8443 --token \"$TOKEN\" --insecure-skip-tls-verify > topology.dot": "needs the port-forward to an installed manager's metrics Service, and its token",
	"flagplane explain deploy/web -n shop --url https://127.0.0.1:8443 --token-file ./token":                       "needs the port-forward to an installed manager's metrics Service, and a token file",
	"go test ./test/docs -count=1 -ginkgo.v":                                                                       "runs this very suite",
	`kubectl logs -n flagplane-system -l app.kubernetes.io/name=flagplane,app.kubernetes.io/component=manager --tail=-1 --prefix | grep -E '"FeatureFlag":\{"name":"shop-flags","namespace":"shop"\}'`:           "reads the logs of an installed manager's pods, and the demo runs the manager in-process; test/e2e runs this grep over the manager's lines after an edit ('the logs of one FeatureFlag edit')",
	`kubectl logs -n flagplane-system -l app.kubernetes.io/name=flagplane,app.kubernetes.io/component=manager --tail=-1 | jq -cR 'fromjson? | select(.FeatureFlag == {"namespace":"shop","name":"shop-flags"})'`: "reads the logs of an installed manager's pods, and the demo runs the manager in-process; the grep above it is run by test/e2e",
}

// exampleOutput are the commands whose output the docs show only as an
// example, with the reason.
var exampleOutput = map[string]string{
	"kubectl get featureflags -n shop -o wide": "the AGE column",
}

// offline says whether a command runs without a cluster.
func offline(text string) bool {
	f := strings.Fields(text)
	if len(f) == 0 {
		return false
	}
	sub := ""
	if len(f) > 1 {
		sub = f[1]
	}
	switch strings.TrimPrefix(f[0], "bin/") {
	case "make", "source":
		return true
	case "helm":
		return sub == "template" || sub == "lint"
	case "kubectl":
		return sub == "kustomize" || sub == "plugin"
	case "flagplane":
		return sub == "completion" || slices.Contains(f, "--from-dir")
	}
	return false
}

// shown is a command the docs show, with every place that shows it.
type shown struct {
	text   string
	places []command
}

// loadDocs reads every doc: the commands in the order the docs show them
// (README.md, then docs/*.md by name), the Make targets of inline code,
// and the problems of form.
func loadDocs(root string) (cmds []*shown, targets []string, problems []string, err error) {
	files, err := docFiles(root)
	if err != nil {
		return nil, nil, nil, err
	}
	byText := map[string]*shown{}
	for _, f := range files {
		d, err := extractFile(filepath.Join(root, f), f)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, c := range d.commands {
			s, ok := byText[c.text]
			if !ok {
				s = &shown{text: c.text}
				byText[c.text] = s
				cmds = append(cmds, s)
			}
			s.places = append(s.places, c)
		}
		for _, t := range d.makeTargets {
			if !slices.Contains(targets, t) {
				targets = append(targets, t)
			}
		}
		problems = append(problems, d.problems...)
	}
	return cmds, targets, problems, nil
}

// The docs are read when the spec tree is built, so that every command is
// a spec of its own.
var docCommands, docMakeTargets, docProblems = func() ([]*shown, []string, []string) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	cmds, targets, problems, err := loadDocs(root)
	if err != nil {
		panic(fmt.Sprintf("reading the docs: %v", err))
	}
	return cmds, targets, problems
}()

func counts() (off, cluster, skipped int) {
	for _, c := range docCommands {
		switch {
		case notRunnable[c.text] != "":
			skipped++
		case offline(c.text):
			off++
		default:
			cluster++
		}
	}
	return off, cluster, skipped
}

var _ = Describe("The docs", func() {
	It("follow the convention of code blocks", func() {
		Expect(docProblems).To(BeEmpty())
	})

	It("list every doc in docs/README.md", func() {
		index, err := os.ReadFile(filepath.Join(env.root, "docs", "README.md"))
		Expect(err).NotTo(HaveOccurred())
		files, err := filepath.Glob(filepath.Join(env.root, "docs", "*.md"))
		Expect(err).NotTo(HaveOccurred())
		for _, f := range files {
			name := filepath.Base(f)
			if name == "README.md" {
				continue
			}
			Expect(string(index)).To(ContainSubstring("("+name+")"), "docs/README.md links %s", name)
		}
	})

	It("name only Make targets that exist", func() {
		Expect(docMakeTargets).NotTo(BeEmpty(), "the docs name Make targets in inline code")
		out, err := env.run(context.Background(), "make "+strings.Join(docMakeTargets, " "), false)
		Expect(err).NotTo(HaveOccurred(), "make -n %s:\n%s", strings.Join(docMakeTargets, " "), out)
	})

	// The commands above run make as make -n, with bin/ a link to the
	// project's: a recipe that make runs even under -n (one that calls
	// $(MAKE)) must not write there, where a make test may be running.
	// And no variable is used before it is defined: in a rule's
	// prerequisites it is then empty, and what it names is not built (make
	// test's chainsaw was not, on a fresh machine).
	It("name Make targets whose dry runs write nothing and use only defined variables", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		entries, err := os.ReadDir(env.root)
		Expect(err).NotTo(HaveOccurred())
		for _, e := range entries {
			if e.Name() != ".git" && e.Name() != "bin" {
				Expect(os.Symlink(filepath.Join(env.root, e.Name()), filepath.Join(dir, e.Name()))).To(Succeed())
			}
		}
		Expect(os.Mkdir(filepath.Join(dir, "bin"), 0o755)).To(Succeed())
		cmd := exec.CommandContext(ctx, "make", append([]string{"-n", "--warn-undefined-variables"}, docMakeTargets...)...)
		cmd.Dir, cmd.Env = dir, env.environ(false)
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "make -n %s:\n%s", strings.Join(docMakeTargets, " "), out)
		for _, line := range strings.Split(string(out), "\n") {
			Expect(line).NotTo(ContainSubstring("undefined variable"))
		}
		written, err := os.ReadDir(filepath.Join(dir, "bin"))
		Expect(err).NotTo(HaveOccurred())
		Expect(written).To(BeEmpty(), "make -n %s wrote into bin/", strings.Join(docMakeTargets, " "))
	}, NodeTimeout(2*time.Minute))

	It("list in their tables only commands they show", func() {
		texts := map[string]bool{}
		for _, c := range docCommands {
			texts[c.text] = true
		}
		for _, table := range []map[string]string{notRunnable, exampleOutput} {
			for _, text := range slices.Sorted(maps.Keys(table)) {
				Expect(texts).To(HaveKey(text), "no doc shows %q any more: remove it from the table", text)
			}
		}
		for text := range exampleOutput {
			Expect(notRunnable).NotTo(HaveKey(text), "%q does not run: its output is not compared anyway", text)
		}
	})
})

var _ = Describe("Commands the docs show", func() {
	Context("offline", func() {
		for _, c := range docCommands {
			if notRunnable[c.text] != "" || !offline(c.text) {
				continue
			}
			It(c.text, Label("offline"), func(ctx SpecContext) { env.check(ctx, c, false) }, NodeTimeout(2*time.Minute))
		}
	})

	Context("against the demo's cluster", Ordered, ContinueOnFailure, func() {
		BeforeAll(func(ctx SpecContext) { env.startCluster(ctx) }, NodeTimeout(5*time.Minute))
		for _, c := range docCommands {
			if notRunnable[c.text] != "" || offline(c.text) {
				continue
			}
			It(c.text, Label("cluster"), func(ctx SpecContext) { env.check(ctx, c, true) }, NodeTimeout(2*time.Minute))
		}
	})

	Context("not runnable here", func() {
		for _, c := range docCommands {
			if reason := notRunnable[c.text]; reason != "" {
				It(c.text, Label("not-runnable"), func() { Skip(reason) })
			}
		}
	})
})

// check runs a command and compares what it prints with what the docs show.
func (e *environment) check(ctx context.Context, c *shown, cluster bool) {
	GinkgoHelper()
	if e.needsMissingTool(c.text) {
		Skip(fmt.Sprintf("%s is not built (make helm)", filepath.Join("bin", "helm")))
	}
	out, err := e.run(ctx, c.text, cluster)
	Expect(err).NotTo(HaveOccurred(), "%s, shown at %s, failed:\n%s", c.text, c.places[0].where, out)
	if exampleOutput[c.text] != "" {
		return
	}
	for _, p := range c.places {
		missing := missingLine(p.output, out)
		Expect(missing).To(BeEmpty(), "%s shows at %s a line the command does not print (in that order):\n  %s\nit printed:\n%s", c.text, p.where, missing, out)
	}
}

// needsMissingTool: helm is built by make test-chart, which runs before
// the suites; run alone, the suite may find it missing.
func (e *environment) needsMissingTool(text string) bool {
	f := strings.Fields(text)
	if len(f) == 0 || strings.TrimPrefix(f[0], "bin/") != "helm" {
		return false
	}
	_, err := os.Stat(filepath.Join(e.root, "bin", "helm"))
	return err != nil
}

// run runs a command the way check does, and returns what it printed.
func (e *environment) run(ctx context.Context, text string, cluster bool) (string, error) {
	line := text
	if f := strings.Fields(text); len(f) > 0 && f[0] == "make" {
		line = "make -n" + strings.TrimPrefix(text, "make")
	}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", line)
	cmd.Dir = e.scratch
	cmd.Env = e.environ(cluster)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	_, _ = fmt.Fprintf(GinkgoWriter, "$ %s\n%s", line, out.String())
	return out.String(), err
}
