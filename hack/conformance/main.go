// Command conformance runs the OpenFeature Operator's own e2e suite, as
// its repository holds it, against flagplane: `make conformance
// OFO_DIR=<a checkout of open-feature-operator>`.
//
// It starts a real single-node cluster (test/realnode), installs flagplane
// from its chart in place of OFO's `make deploy-operator`, with OFO's
// pinned flagd tag and OFO's app.kubernetes.io/managed-by value (the
// managedBy setting), and runs OFO's runner as OFO's Makefile does, from the
// checkout's root: `chainsaw test --test-dir ./test/e2e/chainsaw`, with
// OFO's .chainsaw.yaml. Nothing of the suite is changed or copied; chainsaw
// only writes a JSON report besides, which is turned into a table of every
// test and step.
//
// The images the suite names are the real programs, served by the node's
// registry: Debian's nginx (nginx:stable-alpine), Debian's curl with
// busybox's shell (curlimages/curl:8.11.1), busybox, and flagd. Only flagd
// v0.16.0's module is served by the Go module proxy here, so the image
// under OFO's flagd tag runs flagd v0.16.0; the results say so.
//
// A failure that is a documented deliberate difference (deliberate below,
// docs/openfeature-operator.md, "Differences") is reported as such;
// any other failure makes the command fail.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr/funcr"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/realnode"
)

// deliberate are the OFO test steps whose failures are flagplane's
// documented differences, by chainsaw test and step name, with the reason.
var deliberate = map[string]string{
	"flagd-custom-ports/step-01": "a FeatureFlagSource's port and managementPort: flagplane declares the ports flagd listens on " +
		"(containerPort and the Service's targetPort 8888 and 9999); OFO's Deployment declares 8013 and 8014 while flagd " +
		"listens on 8888 and 9999, so OFO's Service sends requests to a port nothing listens on",
	"fsconfig-flagd-proxy-sync/step-01": "flagd-proxy sources sync from flagplane's built-in sync server, which wants each sidecar's " +
		"namespace credential in a --sources headers field; flagd has that field from v0.15.6, so with OFO's v0.15.4 " +
		"flagplane leaves the entry out and says so (the source's FlagdVersionSupported=False, an Event, an admission " +
		"warning on the pod); with flagplane's default v0.16.0 the scenario's sidecar serves its flags",
}

// cpuRequest is each injected or Flagd flagd's CPU request in the run.
const cpuRequest = "50m"

type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, ",") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var (
		ofoDir, chainsaw, flagdTag, report string
		sets                               setFlags
		parallel                           int
	)
	flag.StringVar(&ofoDir, "ofo-dir", "", "a checkout of open-feature-operator (its test/e2e/chainsaw and .chainsaw.yaml are used as they are)")
	flag.StringVar(&chainsaw, "chainsaw", "", "the chainsaw binary (make chainsaw)")
	flag.StringVar(&flagdTag, "flagd-tag", "", "flagd tag to inject (default: the one OFO's chart pins, sidecarConfiguration.image.tag)")
	flag.StringVar(&report, "report", "", "where to write the results as a Markdown table (default bin/conformance/results.md)")
	flag.Var(&sets, "set", "a helm --set value for the install, after the defaults (repeatable)")
	flag.IntVar(&parallel, "parallel", 0, "chainsaw's --parallel (0: chainsaw's default)")
	flag.Parse()
	// The API server's warnings (admission's among them) are printed.
	log.SetLogger(funcr.New(func(prefix, args string) { fmt.Println(prefix, args) }, funcr.Options{}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, ofoDir, chainsaw, flagdTag, report, sets, parallel)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, ofoDir, chainsaw, flagdTag, reportPath string, sets []string, parallel int) error {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(root, "bin")
	if ofoDir, err = filepath.Abs(ofoDir); err != nil {
		return err
	}
	if chainsaw, err = filepath.Abs(chainsaw); err != nil {
		return err
	}
	suite := filepath.Join(ofoDir, "test", "e2e", "chainsaw")
	if _, err := os.Stat(filepath.Join(ofoDir, ".chainsaw.yaml")); err != nil {
		return fmt.Errorf("%s is not a checkout of open-feature-operator with its e2e suite: %w", ofoDir, err)
	}
	if _, err := os.Stat(suite); err != nil {
		return fmt.Errorf("%s is not a checkout of open-feature-operator with its e2e suite: %w", ofoDir, err)
	}
	if flagdTag == "" {
		if flagdTag, err = ofoFlagdTag(ofoDir); err != nil {
			return err
		}
	}
	if reportPath == "" {
		reportPath = filepath.Join(bin, "conformance", "results.md")
	}

	repo, tag, err := realnode.ChartImage(root)
	if err != nil {
		return err
	}
	images := []realnode.Image{{Ref: repo + ":" + tag, Layout: filepath.Join(root, "dist", "image")},
		// The image of OFO's flagd tag holds flagd v0.16.0: the one version
		// the module proxy serves.
		realnode.FlagdAt("ghcr.io/open-feature/flagd:"+flagdTag, bin),
		realnode.BusyboxAt("docker.io/library/busybox:1.37.0"),
	}
	nginx, err := realnode.NginxAt(realnode.NginxImage, bin)
	if err != nil {
		return err
	}
	curl, err := realnode.CurlAt(realnode.CurlImage)
	if err != nil {
		return err
	}
	images = append(images, nginx, curl)

	say("starting a single-node cluster")
	c, err := realnode.Start(ctx, realnode.Options{Log: os.Stdout, Images: images})
	if err != nil {
		return err
	}
	defer func() {
		say("stopping and removing the cluster")
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "conformance:", err)
		}
	}()

	// OFO's asserts select a Flagd's objects by OFO's managed-by value, as
	// its users' selectors do: the setting for them.
	// OFO's .chainsaw.yaml keeps every test's namespace (skipDelete): its
	// ten flagd containers at OFO's 200m CPU request do not fit a 2-core
	// node, so they request less.
	helmArgs := []string{"--set", "sidecarConfiguration.image.tag=" + flagdTag, "--set", "managedBy=open-feature-operator",
		"--set", "sidecarConfiguration.resources.requests.cpu=" + cpuRequest}
	for _, s := range sets {
		helmArgs = append(helmArgs, "--set", s)
	}
	say("$ helm install flagplane charts/flagplane --wait %s", strings.Join(helmArgs, " "))
	out, err := c.InstallFlagplane(ctx, root, helmArgs...)
	fmt.Print(out)
	if err != nil {
		return err
	}

	reportDir, err := os.MkdirTemp("", "flagplane-conformance-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(reportDir)
	args := []string{"test", "--test-dir", "./test/e2e/chainsaw", "--no-color",
		"--report-format", "JSON", "--report-path", reportDir, "--report-name", "chainsaw-report"}
	if parallel > 0 {
		args = append(args, "--parallel", fmt.Sprint(parallel))
	}
	say("$ cd %s && chainsaw %s", ofoDir, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, chainsaw, args...)
	cmd.Dir = ofoDir
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// chainsaw's scripts run kubectl: the one built with the control plane.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	began := time.Now()
	runErr := cmd.Run()
	took := time.Since(began)
	var exit *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exit) {
		return fmt.Errorf("running chainsaw: %w", runErr)
	}

	if runErr != nil {
		path := filepath.Join(filepath.Dir(reportPath), "diagnostics.txt")
		if err := diagnose(c, path); err != nil {
			fmt.Fprintln(os.Stderr, "conformance: writing diagnostics:", err)
		} else {
			say("chainsaw failed: the pods, their logs and the manager's log are in %s", path)
		}
	}

	rep, err := readReport(filepath.Join(reportDir, "chainsaw-report.json"))
	if err != nil {
		return err
	}
	table, unexplained := results(rep, flagdTag, took)
	fmt.Println()
	fmt.Print(table)
	if err := os.MkdirAll(filepath.Dir(reportPath), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(reportPath, []byte(table), 0o644); err != nil {
		return err
	}
	say("results written to %s", reportPath)
	if len(unexplained) > 0 {
		return fmt.Errorf("%d test(s) failed that are not documented differences: %s", len(unexplained), strings.Join(unexplained, ", "))
	}
	return nil
}

// diagnose writes what a failed run needs to be understood, before the
// cluster goes: every chainsaw namespace's pods (described, with their
// annotations and logs), its flagplane objects' status, and the manager's
// log.
func diagnose(c *realnode.Cluster, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	var b strings.Builder
	section := func(title string, args ...string) {
		out, err := c.Kubectl(args...)
		if err != nil {
			out += "\n(error: " + err.Error() + ")"
		}
		fmt.Fprintf(&b, "===== %s\n$ kubectl %s\n%s\n", title, strings.Join(args, " "), out)
	}
	nsOut, err := c.Kubectl("get", "namespaces", "-o", "name")
	if err != nil {
		return err
	}
	for _, ns := range strings.Fields(nsOut) {
		ns = strings.TrimPrefix(ns, "namespace/")
		if !strings.HasPrefix(ns, "chainsaw-") {
			continue
		}
		section(ns+": pods", "-n", ns, "get", "pods", "-o", "yaml")
		section(ns+": flagplane's objects", "-n", ns, "get", "featureflags,featureflagsources,flagds,inprocessconfigurations,deployments,services,configmaps,events", "-o", "wide")
		section(ns+": status", "-n", ns, "get", "featureflags,featureflagsources,flagds", "-o", "yaml")
		section(ns+": logs", "-n", ns, "logs", "--all-containers", "--prefix", "--tail=100", "-l", "app=open-feature-e2e-test")
		section(ns+": job logs", "-n", ns, "logs", "--all-containers", "--prefix", "--tail=50", "-l", "batch.kubernetes.io/controller-uid")
	}
	section("the manager", "-n", "flagplane-system", "logs", "-l", "app.kubernetes.io/name=flagplane", "--all-containers", "--prefix", "--tail=-1")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// ofoFlagdTag is the flagd tag OFO's chart injects.
func ofoFlagdTag(ofoDir string) (string, error) {
	path := filepath.Join(ofoDir, "chart", "open-feature-operator", "values.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading OFO's pinned flagd tag (or pass -flagd-tag): %w", err)
	}
	var values struct {
		SidecarConfiguration struct {
			Image struct {
				Tag string `json:"tag"`
			} `json:"image"`
		} `json:"sidecarConfiguration"`
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	if values.SidecarConfiguration.Image.Tag == "" {
		return "", fmt.Errorf("%s pins no sidecarConfiguration.image.tag: pass -flagd-tag", path)
	}
	return values.SidecarConfiguration.Image.Tag, nil
}

// report is chainsaw's JSON report (--report-format JSON).
type report struct {
	Tests []struct {
		Name     string `json:"name"`
		BasePath string `json:"basePath"`
		Skipped  bool   `json:"skipped"`
		Steps    []struct {
			Name       string `json:"name"`
			Operations []struct {
				Name    string `json:"name"`
				Type    string `json:"type"`
				Failure *struct {
					Error string `json:"error"`
				} `json:"failure"`
			} `json:"operations"`
		} `json:"steps"`
	} `json:"tests"`
}

func readReport(path string) (*report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("chainsaw wrote no report: %w", err)
	}
	var r report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("reading chainsaw's report: %w", err)
	}
	if len(r.Tests) == 0 {
		return nil, errors.New("chainsaw's report holds no test")
	}
	return &r, nil
}

// results is the Markdown table of every test and step, and the tests
// that failed with no documented reason.
func results(r *report, flagdTag string, took time.Duration) (string, []string) {
	var b strings.Builder
	var unexplained []string
	passed := 0
	fmt.Fprintf(&b, "| Test | Step | Result | Why |\n|---|---|---|---|\n")
	deliberateFailures := 0
	for _, t := range r.Tests {
		failed, explained := false, true
		for _, s := range t.Steps {
			result, why := "pass", ""
			for _, op := range s.Operations {
				if op.Failure != nil {
					result = "fail"
					why = fmt.Sprintf("%s: %s", op.Type, firstLine(op.Failure.Error))
					break
				}
			}
			if len(s.Operations) == 0 {
				result = "not run"
			}
			reason, listed := deliberate[t.Name+"/"+s.Name]
			switch {
			case result == "fail" && listed:
				failed = true
				why = "deliberate difference: " + reason + ". chainsaw: " + why
			case result == "fail":
				failed, explained = true, false
			case result == "pass" && listed:
				why = "listed as a deliberate difference, yet it passed"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.Name, s.Name, result, escape(why))
		}
		switch {
		case t.Skipped:
			fmt.Fprintf(&b, "| %s | | skipped | |\n", t.Name)
		case !failed:
			passed++
		case explained:
			deliberateFailures++
		default:
			unexplained = append(unexplained, t.Name)
		}
	}
	fmt.Fprintf(&b, "\n%d of %d tests passed in %s (failures that are deliberate differences: %d). "+
		"flagd: the image tagged %s runs flagd v0.16.0, the only version the Go module proxy serves here.\n",
		passed, len(r.Tests), took.Round(time.Second), deliberateFailures, flagdTag)
	return b.String(), unexplained
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if len(s) > 300 {
		s = s[:300] + " …"
	}
	return s
}

func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func say(format string, args ...any) {
	fmt.Printf(">> "+format+"\n", args...)
}
