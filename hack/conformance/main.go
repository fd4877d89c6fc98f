// Command conformance runs the OpenFeature Operator's own e2e suite, as
// its repository holds it, against flagplane: `make conformance`, part of
// `make test`. The suite comes from OFO's module as the Go module proxy
// serves it (-ofo-version, copied out of the read-only module cache), or
// from a checkout (OFO_DIR, -ofo-dir).
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
// any other failure makes the command fail. So does a table of tests and
// steps in docs/openfeature-operator.md that differs from the run's
// (-doc; -write-doc rewrites it).
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
	"slices"
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
	"fsconfig-flagd-proxy-sync/step-01": "flagd-proxy sources sync from flagplane's built-in sync server, which serves a namespace's " +
		"flag sets only to a sidecar that presents that namespace's credential, in a --sources headers field flagd has from " +
		"v0.15.6 (OFO's flagd-proxy serves any flag set to anyone who names it); so with OFO's v0.15.4 flagplane leaves the " +
		"entry out and says so (the source's FlagdVersionSupported=False, an Event, an admission warning on the pod); with " +
		"flagplane's default v0.16.0 the scenario's sidecar serves its flags",
}

// cpuRequest is each injected or Flagd flagd's CPU request in the run.
const cpuRequest = "50m"

// chainsaw's timeouts of an apply and of a script, where OFO's
// .chainsaw.yaml leaves chainsaw's defaults (5 s each): see run.
const (
	chainsawApplyTimeout = "1m"
	chainsawExecTimeout  = "70s"
)

type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, ",") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var (
		o        options
		sets     setFlags
		writeDoc bool
	)
	flag.StringVar(&o.ofoDir, "ofo-dir", "", "a checkout of open-feature-operator (its test/e2e/chainsaw and .chainsaw.yaml are used as they are); default: its module at -ofo-version")
	flag.StringVar(&o.ofoVersion, "ofo-version", defaultOFOVersion, "the version of OFO's module whose suite runs, when -ofo-dir is not given (downloaded through the Go module proxy)")
	flag.StringVar(&o.doc, "doc", "docs/openfeature-operator.md", "the document whose conformance table must equal the run's (empty: none)")
	flag.BoolVar(&writeDoc, "write-doc", false, "rewrite -doc's table from the run instead of comparing")
	flag.StringVar(&o.operator, "operator", "flagplane", "the operator the suite runs against: flagplane (from its chart), or ofo (the OpenFeature Operator itself, built from -ofo-dir, a checkout: the control of the suite, the node and the images; no failure fails the command)")
	flag.StringVar(&o.chainsaw, "chainsaw", "", "the chainsaw binary (make chainsaw)")
	flag.StringVar(&o.flagdTag, "flagd-tag", "", "flagd tag to inject (default: the one OFO's chart pins, sidecarConfiguration.image.tag)")
	flag.StringVar(&o.report, "report", "", "where to write the results as a Markdown table (default bin/conformance/results.md)")
	flag.Var(&sets, "set", "a helm --set value for the install, after the defaults (repeatable)")
	flag.IntVar(&o.parallel, "parallel", 0, "chainsaw's --parallel (0: chainsaw's default)")
	flag.IntVar(&o.measure, "measure", 0, "instead of the suite, the same work for either operator: N opted-in Deployments of one pod, timed and measured (admission latency by the API server's histogram, the manager's memory and CPU by the kubelet)")
	flag.StringVar(&o.scale, "scale", "", "with -measure: W:F, W Deployments of no replica and F FeatureFlags with a source each, created before the measured work (e.g. 1000:100)")
	flag.BoolVar(&o.profile, "profile", false, "with -measure and flagplane: run the manager with --profiling and, after the work, read a 30 s CPU profile and its metrics from its metrics server (written beside -report)")
	flag.BoolVar(&o.migrate, "migrate", false, "instead of the suite, a live migration off the OpenFeature Operator (built from -ofo-dir) to flagplane, as docs/openfeature-operator.md says, with pods created, the flag set edited and every flagd asked throughout")
	flag.Parse()
	o.sets, o.writeDoc = sets, writeDoc
	// The API server's warnings (admission's among them) are printed.
	log.SetLogger(funcr.New(func(prefix, args string) { fmt.Println(prefix, args) }, funcr.Options{}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
}

// defaultOFOVersion is the OFO release whose suite `make test` runs.
const defaultOFOVersion = "v0.9.2"

type options struct {
	ofoDir, ofoVersion, chainsaw, flagdTag, report, doc, operator, scale string
	sets                                                                 []string
	parallel, measure                                                    int
	writeDoc, migrate, profile                                           bool
}

func run(ctx context.Context, o options) error {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(root, "bin")
	ofoDir, chainsaw, flagdTag, reportPath, sets, parallel := o.ofoDir, o.chainsaw, o.flagdTag, o.report, o.sets, o.parallel
	origin := "a checkout"
	ofo := o.operator == "ofo" || o.migrate
	switch {
	case o.operator != "flagplane" && o.operator != "ofo":
		return fmt.Errorf("-operator %q: flagplane or ofo", o.operator)
	case o.migrate && ofoDir == "":
		return errors.New("-migrate starts from the OpenFeature Operator, built from -ofo-dir, a checkout of open-feature-operator")
	case ofo && ofoDir == "":
		return errors.New("-operator ofo builds OFO's manager: it needs -ofo-dir, a checkout of open-feature-operator")
	case ofo:
		o.doc = "" // the document's table is flagplane's
	}
	if ofoDir == "" {
		say("OFO's suite from its module, %s, through the Go module proxy", o.ofoVersion)
		if ofoDir, err = ofoModule(ctx, o.ofoVersion, filepath.Join(bin, "ofo")); err != nil {
			return err
		}
		origin = "module " + ofoModulePath + "@" + o.ofoVersion
	}
	if ofoDir, err = filepath.Abs(ofoDir); err != nil {
		return err
	}
	var doc string
	if o.doc != "" {
		doc = filepath.Join(root, o.doc)
		if filepath.IsAbs(o.doc) {
			doc = o.doc
		}
		// A document without its table fails now, not after the run.
		if _, err := readDocTable(doc); err != nil {
			return err
		}
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
	if ofo {
		manager := filepath.Join(bin, "ofo", "manager")
		say("building OFO's manager from %s", ofoDir)
		if err := buildOFO(ctx, ofoDir, manager); err != nil {
			return err
		}
		images = append(images, realnode.Image{Ref: ofoImage, Files: []realnode.ImageFile{{Src: manager, Dst: "/manager", Mode: 0o755}},
			Entrypoint: []string{"/manager"}, User: "65532:65532"})
	}

	say("starting a single-node cluster")
	// -measure counts the manager's API requests in the API server's audit
	// log. With -scale, kube-controller-manager may send 200 requests a
	// second rather than 20: its ReplicaSets for thousands of Deployments
	// would otherwise hold up the measured pods by many minutes, under
	// either operator.
	opts := realnode.Options{Log: os.Stdout, Images: images, AuditLog: o.measure > 0}
	if o.scale != "" {
		opts.ControllerManagerQPS = 200
	}
	c, err := realnode.Start(ctx, opts)
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
	if o.measure > 0 {
		// Like for like: OFO's manager runs one replica; flagplane's chart
		// runs two by default (each keeps its graph and serves admission).
		helmArgs = append(helmArgs, "--set", "controllerManager.replicas=1")
		if o.profile {
			helmArgs = append(helmArgs, "--set", "extraArgs={--profiling}")
		}
	}
	for _, s := range sets {
		helmArgs = append(helmArgs, "--set", s)
	}
	installed := time.Now()
	if ofo {
		if err := installOFO(ctx, c, ofoDir); err != nil {
			return err
		}
	} else {
		say("$ helm install flagplane charts/flagplane --wait %s", strings.Join(helmArgs, " "))
		out, err := c.InstallFlagplane(ctx, root, helmArgs...)
		fmt.Print(out)
		if err != nil {
			return err
		}
	}

	if o.migrate {
		return migrate(ctx, c, root, ofoDir, flagdTag, reportPath)
	}
	if o.measure > 0 {
		startup := time.Since(installed)
		operator, webhook, managerNS := "flagplane", "pods.flagplane.core.openfeature.dev", "flagplane-system"
		if ofo {
			operator, webhook, managerNS = "OpenFeature Operator", "mutate.openfeature.dev", "open-feature-operator-system"
		}
		scaleLine := ""
		if o.scale != "" {
			sw, err := parseScale(o.scale)
			if err != nil {
				return err
			}
			say("creating %d Deployments of no replica and %d FeatureFlags with a source each", sw.workloads, sw.flagSets)
			scaleBegan := time.Now()
			created, replicaSets, settled, err := sw.create(ctx, c, !ofo)
			if err != nil {
				return err
			}
			// What the manager asked of the API server meanwhile (printed
			// by verb and resource).
			requests, _, err := managerRequests(c.AuditLogPath, managerNS, scaleBegan, time.Now())
			if err != nil {
				return err
			}
			scaleLine = fmt.Sprintf("With %d Deployments (no replica) and %d FeatureFlags, each with a FeatureFlagSource, in namespace scale: created in %s; kube-controller-manager's ReplicaSets for them %s after",
				sw.workloads, sw.flagSets, created.Round(100*time.Millisecond), replicaSets.Round(100*time.Millisecond))
			if !ofo {
				scaleLine += fmt.Sprintf("; flagplane's %d ConfigMaps for them %s after", sw.flagSets, settled.Round(100*time.Millisecond))
			}
			scaleLine += fmt.Sprintf("; the manager's API requests meanwhile, Leases apart: %d.\n", requests)
			say("%s", scaleLine)
		}
		m, err := measure(ctx, c, operator, webhook, managerNS, o.measure, startup)
		if err != nil {
			return err
		}
		if o.profile && !ofo {
			if err := os.MkdirAll(filepath.Dir(reportPath), 0o755); err != nil {
				return err
			}
			if err := profileManager(ctx, c, managerNS, filepath.Dir(reportPath)); err != nil {
				return err
			}
		}
		table := fmt.Sprintf("%s%d Deployments of one pod, one FeatureFlag, file provider, on the real node:\n%s\n%s\n", scaleLine, o.measure, header(m), m)
		fmt.Print(table)
		if err := os.MkdirAll(filepath.Dir(reportPath), 0o755); err != nil {
			return err
		}
		return os.WriteFile(reportPath, []byte(table), 0o644)
	}

	reportDir, err := os.MkdirTemp("", "flagplane-conformance-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(reportDir)
	args := []string{"test", "--test-dir", "./test/e2e/chainsaw", "--no-color",
		"--report-format", "JSON", "--report-path", reportDir, "--report-name", "chainsaw-report"}
	// OFO's .chainsaw.yaml sets the timeouts of its asserts and errors,
	// not of its applies and scripts: chainsaw's defaults of 5 s cut
	// flagd-with-gateway-api's apply of 650 KB of Gateway API CRDs on a
	// busy 2-core machine, and its `kubectl wait --timeout=60s` at 5 s.
	// Both get the minute that script asks for; what is checked is the same.
	args = append(args, "--apply-timeout", chainsawApplyTimeout, "--exec-timeout", chainsawExecTimeout)
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
		managerNS, managerSelector := "flagplane-system", "app.kubernetes.io/name=flagplane"
		if ofo {
			managerNS, managerSelector = "open-feature-operator-system", "app.kubernetes.io/name=open-feature-operator"
		}
		if err := diagnose(c, path, managerNS, managerSelector); err != nil {
			fmt.Fprintln(os.Stderr, "conformance: writing diagnostics:", err)
		} else {
			say("chainsaw failed: the pods, their logs and the manager's log are in %s", path)
		}
	}

	rep, err := readReport(filepath.Join(reportDir, "chainsaw-report.json"))
	if err != nil {
		return err
	}
	listed := deliberate
	if ofo {
		// The control: OFO's failures are OFO's, none is a difference.
		listed, origin = nil, origin+", against the OpenFeature Operator itself"
	}
	table, docTable, unexplained := results(rep, listed, flagdTag, took, origin)
	fmt.Println()
	fmt.Print(table)
	if err := os.MkdirAll(filepath.Dir(reportPath), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(reportPath, []byte(table), 0o644); err != nil {
		return err
	}
	say("results written to %s", reportPath)
	if len(unexplained) > 0 && !ofo {
		return fmt.Errorf("%d test(s) failed that are not documented differences: %s", len(unexplained), strings.Join(unexplained, ", "))
	}
	if doc == "" {
		return nil
	}
	if o.writeDoc {
		if err := writeDocTable(doc, docTable); err != nil {
			return err
		}
		say("%s: its table rewritten from this run", doc)
		return nil
	}
	have, err := readDocTable(doc)
	if err != nil {
		return err
	}
	if have != docTable {
		return fmt.Errorf("%s's table of OFO's suite is not this run's (make conformance-doc rewrites it from a run):\n--- the document\n%s--- this run\n%s", doc, have, docTable)
	}
	say("%s: its table is this run's", doc)
	return nil
}

// diagnose writes what a failed run needs to be understood, before the
// cluster goes: every chainsaw namespace's pods (described, with their
// annotations and logs), its flagplane objects' status, and the manager's
// log.
func diagnose(c *realnode.Cluster, path, managerNS, managerSelector string) error {
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
	section("the operator's namespace", "-n", managerNS, "get", "pods,deployments,events", "-o", "wide")
	section("the manager", "-n", managerNS, "logs", "-l", managerSelector, "--all-containers", "--prefix", "--tail=-1")
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
	Tests []reportTest `json:"tests"`
}

type reportTest struct {
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

// results is the Markdown table of every test and step, with chainsaw's
// errors; the table for the document, which says the same without what
// changes from run to run (chainsaw's error texts, the time); and the
// tests that failed with no documented reason.
func results(r *report, deliberate map[string]string, flagdTag string, took time.Duration, origin string) (string, string, []string) {
	var b, d strings.Builder
	var unexplained []string
	passed := 0
	fmt.Fprintf(&b, "| Test | Step | Result | Why |\n|---|---|---|---|\n")
	fmt.Fprintf(&d, "| Test | Step | Result | Why |\n|---|---|---|---|\n")
	deliberateFailures := 0
	// chainsaw reports tests in the order they ended, which its parallel
	// runs change from run to run: the tables go by name.
	tests := slices.Clone(r.Tests)
	slices.SortStableFunc(tests, func(a, b reportTest) int { return strings.Compare(a.Name, b.Name) })
	for _, t := range tests {
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
			docWhy := why
			switch {
			case result == "fail" && listed:
				failed = true
				why = "deliberate difference: " + reason + ". chainsaw: " + why
				docWhy = "deliberate difference: " + reason
			case result == "fail":
				failed, explained = true, false
			case result == "pass" && listed:
				why = "listed as a deliberate difference, yet it passed"
				docWhy = why
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.Name, s.Name, result, escape(why))
			fmt.Fprintf(&d, "| %s | %s | %s | %s |\n", t.Name, s.Name, result, escape(docWhy))
		}
		switch {
		case t.Skipped:
			fmt.Fprintf(&b, "| %s | | skipped | |\n", t.Name)
			fmt.Fprintf(&d, "| %s | | skipped | |\n", t.Name)
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
	fmt.Fprintf(&d, "\n%d of %d tests pass (suite from %s, flagd tag %s); failures that are deliberate differences: %d.\n",
		passed, len(r.Tests), origin, flagdTag, deliberateFailures)
	return b.String(), d.String(), unexplained
}

// The document's table sits between these two lines.
const (
	docTableBegin = "<!-- conformance table: written by make conformance-doc from a run; make conformance fails when a run differs -->"
	docTableEnd   = "<!-- end of conformance table -->"
)

// readDocTable is the table of a document, between docTableBegin and
// docTableEnd.
func readDocTable(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	_, rest, ok := strings.Cut(string(data), docTableBegin+"\n")
	if !ok {
		return "", fmt.Errorf("%s has no line %q: the conformance table goes after it", path, docTableBegin)
	}
	table, _, ok := strings.Cut(rest, docTableEnd)
	if !ok {
		return "", fmt.Errorf("%s has no line %q after its conformance table", path, docTableEnd)
	}
	return table, nil
}

// writeDocTable replaces the table of a document.
func writeDocTable(path, table string) error {
	have, err := readDocTable(path)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out := strings.Replace(string(data), docTableBegin+"\n"+have+docTableEnd, docTableBegin+"\n"+table+docTableEnd, 1)
	return os.WriteFile(path, []byte(out), 0o644)
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
