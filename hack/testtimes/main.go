// Command testtimes records how long each package's tests take, and each
// step of make test, in a file; and prints them as a table.
//
//	go test -json ./... | testtimes record -file bin/test-times.tsv -step test-unit
//	testtimes mark -file bin/test-times.tsv vet start
//	testtimes print -file bin/test-times.tsv
//	go test -json -exec 'testtimes exec -file bin/test-times.tsv' ./... | testtimes record ...
//
// record reads go test -json (test2json events) on its standard input and
// writes the test output on its standard output, the Output fields
// verbatim, as go test without -json would: each package's output once the
// package is done, all of it for a package that failed, and its last line
// ("ok  ...", "?   ... [no test files]") for one that passed. With -v it
// writes all the output of every package, with -stream every line as it
// comes (one package at a time, as when fuzzing). Lines that are not
// events (the go command's own, with 2>&1) are passed on as they come, and
// so is the output of a build. It appends a row to the file for each
// package, and exits with status 1 when a package failed, did not build or
// did not finish.
//
// exec runs a test binary for go test -exec, and records the CPU time of
// it and of the processes it waited for (exec.go); print gives it beside
// the package's time.
//
// mark appends the start or the end of a step (a Make target), and print
// prints the steps in the order they started, with their wall time, and
// then every package, slowest first, and last why each failing package
// failed: the lines of its output that say so (Ginkgo's [FAILED] blocks,
// the testing package's messages, a panic), so that the end of a long
// log, which may be all a reader of it sees, names the failure.
//
// The file holds one run: its rows are those of the run named by
// FLAGPLANE_TEST_TIMES_RUN (the Makefile sets it to the time make started,
// in Unix nanoseconds), and a row of another run empties the file first.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// runEnv names the run a row belongs to.
const runEnv = "FLAGPLANE_TEST_TIMES_RUN"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet("testtimes "+os.Args[1], flag.ExitOnError)
	file := fs.String("file", "bin/test-times.tsv", "the file of times")
	switch os.Args[1] {
	case "record":
		step := fs.String("step", "", "the step the packages are tested in, as the table shows it")
		verbose := fs.Bool("v", false, "write the output of every package, not only of those that failed")
		stream := fs.Bool("stream", false, "write every line of output as it comes, not package by package")
		_ = fs.Parse(os.Args[2:])
		// An interrupt stops go test, which then ends its output: read it
		// to the end, so that what it printed is written and recorded.
		signal.Ignore(os.Interrupt, syscall.SIGTERM)
		rec := recorder{
			out: bufio.NewWriter(os.Stdout), step: *step, verbose: *verbose, stream: *stream,
			save: func(r row) error { return appendRow(*file, r) },
		}
		ok, err := rec.run(os.Stdin)
		if err != nil {
			fatal(err)
		}
		if !ok {
			os.Exit(1)
		}
	case "mark":
		_ = fs.Parse(os.Args[2:])
		if fs.NArg() != 2 || !slices.Contains([]string{"start", "end", "failed"}, fs.Arg(1)) {
			usage()
		}
		if err := appendRow(*file, row{run: os.Getenv(runEnv), kind: fs.Arg(1), step: fs.Arg(0), at: time.Now()}); err != nil {
			fatal(err)
		}
	case "exec":
		_ = fs.Parse(os.Args[2:])
		if fs.NArg() == 0 {
			usage()
		}
		status, sig, err := execTest(*file, fs.Args())
		if err != nil {
			fatal(err)
		}
		if sig != 0 {
			// End as the binary ended, for go test to say so.
			signal.Reset(sig)
			_ = syscall.Kill(os.Getpid(), sig)
			status = 128 + int(sig)
		}
		os.Exit(status)
	case "print":
		stopped := fs.Bool("stopped", false, "make stopped just now (a failure, an interrupt): count a step without an end, and the time after the last step, to now")
		run := fs.String("run", "", "print nothing but this run's times")
		_ = fs.Parse(os.Args[2:])
		rows, err := readRows(*file)
		if errors.Is(err, os.ErrNotExist) && *run != "" {
			err = nil
		}
		if err != nil {
			fatal(err)
		}
		if *run != "" && (len(rows) == 0 || rows[0].run != *run) {
			fmt.Printf(">> test times (%s): none recorded in this run\n", *file)
			return
		}
		w := bufio.NewWriter(os.Stdout)
		printTable(w, *file, rows, time.Now(), *stopped)
		if err := w.Flush(); err != nil {
			fatal(err)
		}
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: testtimes record [-file F] [-step S] [-v] [-stream] < go test -json output
       testtimes mark [-file F] STEP start|end|failed
       testtimes exec [-file F] TEST-BINARY [ARG...]   (go test -exec)
       testtimes print [-file F] [-stopped] [-run RUN]`)
	os.Exit(2)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "testtimes:", err)
	os.Exit(1)
}

// A row of the file: a package's result (kind pkg), or the start or end of
// a step (kind failed: its end, when its recipe failed; a step that did not
// start, or ended, keeps what it had). Tab-separated: run, kind, step, package, result, seconds (go
// test's elapsed time of the package), at (when it was written, Unix
// nanoseconds).
type row struct {
	run, kind, step, pkg, result string
	seconds                      float64
	at                           time.Time
}

func (r row) String() string {
	clean := func(s string) string { return strings.NewReplacer("\t", " ", "\n", " ").Replace(s) }
	return strings.Join([]string{clean(r.run), r.kind, clean(r.step), clean(r.pkg), r.result,
		strconv.FormatFloat(r.seconds, 'f', 3, 64), strconv.FormatInt(r.at.UnixNano(), 10)}, "\t") + "\n"
}

func parseRow(line string) (row, error) {
	f := strings.Split(line, "\t")
	if len(f) != 7 {
		return row{}, fmt.Errorf("%d fields, want 7: %q", len(f), line)
	}
	seconds, err := strconv.ParseFloat(f[5], 64)
	if err != nil {
		return row{}, err
	}
	at, err := strconv.ParseInt(f[6], 10, 64)
	if err != nil {
		return row{}, err
	}
	return row{run: f[0], kind: f[1], step: f[2], pkg: f[3], result: f[4], seconds: seconds, at: time.Unix(0, at)}, nil
}

// appendRow appends r to the file, in one write (rows of concurrent
// writers do not mix). When the file's first row is of another run, the
// file is emptied first.
func appendRow(path string, r row) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if r.run != "" {
		if first, err := firstRun(path); err == nil && first != r.run {
			flags |= os.O_TRUNC
		}
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(r.String()); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// firstRun is the run of the file's first row; an error when there is none.
func firstRun(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return "", err
	}
	run, _, _ := strings.Cut(line, "\t")
	return run, nil
}

func readRows(path string) ([]row, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rows []row
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if line == "" {
			continue
		}
		r, err := parseRow(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// event is a test2json event (go doc test2json), and the go command's
// build events (ImportPath, build-output, build-fail).
type event struct {
	Time        time.Time
	Action      string
	Package     string
	ImportPath  string
	Test        string
	Elapsed     float64
	Output      string
	FailedBuild string
}

// pkgState is what record holds of a package until it is done.
type pkgState struct {
	start  time.Time
	last   time.Time
	output []string
	// summary is the package's last line of its own (no test named): for a
	// package that passed, the "ok" line go test prints.
	summary string
}

type recorder struct {
	out     *bufio.Writer
	step    string
	verbose bool
	stream  bool
	save    func(row) error

	pkgs  map[string]*pkgState
	order []string // packages in the order they started, for the end of input
}

// run reads the events of in to its end; ok is false when a package failed,
// did not build or did not finish.
func (r *recorder) run(in io.Reader) (ok bool, err error) {
	r.pkgs = map[string]*pkgState{}
	ok = true
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		line, readErr := br.ReadString('\n')
		if line != "" {
			fine, err := r.line(line)
			if err != nil {
				return false, err
			}
			ok = ok && fine
		}
		if readErr == io.EOF {
			break
		}
		if readErr != nil {
			return false, readErr
		}
	}
	// Packages that never ended: go test was killed, or its output cut.
	for _, name := range r.order {
		p := r.pkgs[name]
		if p == nil {
			continue
		}
		ok = false
		r.write(p.output...)
		r.write(fmt.Sprintf("testtimes: %s did not finish\n", name))
		seconds := 0.0
		if !p.start.IsZero() && p.last.After(p.start) {
			seconds = p.last.Sub(p.start).Seconds()
		}
		if err := r.save(row{run: os.Getenv(runEnv), kind: "pkg", step: r.step, pkg: name, result: "unfinished",
			seconds: seconds, at: time.Now()}); err != nil {
			return false, err
		}
	}
	return ok, r.out.Flush()
}

// line handles one line of input; fine is false when it ends a package
// that failed (a test, or its build).
func (r *recorder) line(line string) (fine bool, err error) {
	var e event
	if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil || e.Action == "" {
		r.write(line)
		return true, r.out.Flush()
	}
	switch {
	case e.Action == "build-output":
		r.write(e.Output)
		return true, r.out.Flush()
	case e.Action == "build-fail":
		// The package's fail event (FailedBuild) follows.
		return true, nil
	case e.Package == "":
		return true, nil
	}
	p := r.pkgs[e.Package]
	if p == nil {
		p = &pkgState{start: e.Time}
		r.pkgs[e.Package] = p
		r.order = append(r.order, e.Package)
	}
	if !e.Time.IsZero() {
		p.last = e.Time
	}
	if e.Action == "output" {
		if r.stream {
			r.write(e.Output)
			return true, r.out.Flush()
		}
		p.output = append(p.output, e.Output)
		if e.Test == "" {
			p.summary = e.Output
		}
		return true, nil
	}
	if e.Test != "" || (e.Action != "pass" && e.Action != "fail" && e.Action != "skip") {
		return true, nil
	}
	// The package is done.
	delete(r.pkgs, e.Package)
	result := map[string]string{"pass": "ok", "fail": "FAIL", "skip": "no tests"}[e.Action]
	if e.FailedBuild != "" {
		result = "build failed"
	}
	switch {
	case r.stream:
	case e.Action == "fail" || r.verbose:
		r.write(p.output...)
	default:
		r.write(p.summary)
	}
	if err := r.out.Flush(); err != nil {
		return false, err
	}
	if e.Action == "fail" {
		if why := failureExcerpt(p.output); why != "" {
			if err := r.save(row{run: os.Getenv(runEnv), kind: "why", step: r.step, pkg: e.Package,
				result: strconv.Quote(why), at: time.Now()}); err != nil {
				return false, err
			}
		}
	}
	return e.Action != "fail", r.save(row{run: os.Getenv(runEnv), kind: "pkg", step: r.step, pkg: e.Package,
		result: result, seconds: e.Elapsed, at: time.Now()})
}

// maxExcerptLines bounds the lines failureExcerpt keeps of one package.
const maxExcerptLines = 80

// ansi matches the terminal's color codes, which Ginkgo writes.
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// failureExcerpt is what a failed package's output says of its failures:
// each Ginkgo [FAILED] block up to the line that places it ("In [It] at:
// ..."), the testing package's messages (file_test.go:N: ...), "--- FAIL"
// lines, a flag the test binary does not know (a plain test given
// Ginkgo's flags), and a panic with the lines after it; without color, at
// most maxExcerptLines.
func failureExcerpt(output []string) string {
	var lines []string
	for _, o := range output {
		lines = append(lines, strings.Split(strings.TrimSuffix(ansi.ReplaceAllString(o, ""), "\n"), "\n")...)
	}
	var out []string
	seen := map[string]bool{}
	keep := func(l string) {
		if len(out) < maxExcerptLines {
			out = append(out, l)
		}
	}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "[FAILED]") && !strings.HasPrefix(t, "[FAILED] in ["):
			// The block, to its place; a block printed twice (in the
			// spec's report and in the summary) is kept once.
			end := i
			for end+1 < len(lines) && end-i < 40 && !strings.HasPrefix(strings.TrimSpace(lines[end]), "In [") {
				end++
			}
			block := strings.Join(lines[i:end+1], "\n")
			if !seen[block] {
				seen[block] = true
				for _, b := range lines[i : end+1] {
					keep(b)
				}
			}
			i = end
		case strings.HasPrefix(t, "--- FAIL") || strings.HasPrefix(t, "flag provided but not defined") || testingMessage.MatchString(l):
			keep(l)
		case strings.HasPrefix(t, "panic:"):
			for _, b := range lines[i:min(i+12, len(lines))] {
				keep(b)
			}
			i += 11
		}
	}
	return strings.Join(out, "\n")
}

// testingMessage is a message of t.Error, t.Fatal or t.Log in a failing
// test's output: indented, and placed by its file and line.
var testingMessage = regexp.MustCompile(`^\s+\S+_test\.go:\d+: `)

func (r *recorder) write(s ...string) {
	for _, s := range s {
		_, _ = r.out.WriteString(s)
	}
}
