package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// step is a step of a run, from its marks.
type step struct {
	name       string
	start, end time.Time
	failed     bool
}

// printTable prints the steps of rows in the order they started, each with
// its wall time from the end of the step before (or the run's start) to
// its own end, and how much of it went to its prerequisites (what make
// ran for it before its recipe); then every package, slowest first.
//
// A step without an end is counted to the last row of the file, or to now
// when stopped (make stopped just now); when stopped, the time after the
// last end of a step is a row of its own (make stopped while it built the
// next step's prerequisites). Steps run side by side each count from their
// own start.
func printTable(w io.Writer, file string, rows []row, now time.Time, stopped bool) {
	var steps []*step
	byName := map[string]*step{}
	var whys []row
	var pkgs []tested
	noTests := 0
	// CPU rows (testtimes exec) not yet given to a package's row, by
	// package: a package's is written when its binary ends, before go test
	// says the package is done.
	cpuOf := map[string][]row{}
	runStart, last := time.Time{}, time.Time{}
	for _, r := range rows {
		if ns, err := strconv.ParseInt(r.run, 10, 64); err == nil && runStart.IsZero() {
			runStart = time.Unix(0, ns)
		}
		if r.at.After(last) {
			last = r.at
		}
		switch r.kind {
		case "start":
			s := &step{name: r.step, start: r.at}
			steps = append(steps, s)
			byName[r.step] = s
		case "end":
			if s := byName[r.step]; s != nil {
				s.end = r.at
			}
		case "failed":
			if s := byName[r.step]; s != nil && s.end.IsZero() {
				s.end, s.failed = r.at, true
			}
		case "why":
			whys = append(whys, r)
		case "cpu":
			cpuOf[r.pkg] = append(cpuOf[r.pkg], r)
		case "pkg":
			if r.result == "no tests" {
				noTests++
				continue
			}
			p := tested{row: r, cpu: -1}
			if c := cpuOf[r.pkg]; len(c) > 0 {
				p.cpu = c[len(c)-1].seconds
				cpuOf[r.pkg] = c[:len(c)-1]
			}
			pkgs = append(pkgs, p)
		}
	}
	if stopped {
		last = now
	}

	fmt.Fprintf(w, ">> test times (%s)\n", file)
	if len(steps) > 0 {
		t := table{header: []string{"step", "result", "wall", "prerequisites"}, right: []bool{false, false, true, true}}
		prev, latest := runStart, (*step)(nil)
		for _, s := range steps {
			end, result := s.end, "ok"
			switch {
			case s.failed:
				result = "failed"
			case end.IsZero():
				end, result = last, "unfinished"
				if stopped {
					result = "stopped"
				}
			}
			before := time.Duration(0)
			if !prev.IsZero() && s.start.After(prev) {
				before = s.start.Sub(prev)
			}
			t.add(s.name, result, minutes(end.Sub(s.start)+before), minutes(before))
			if end.After(prev) {
				prev = end
			}
			if latest == nil || s.end.IsZero() || (!latest.end.IsZero() && s.end.After(latest.end)) {
				latest = s
			}
		}
		if stopped && !latest.end.IsZero() {
			t.add("(after "+latest.name+")", "stopped", minutes(now.Sub(latest.end)), "")
		}
		if !runStart.IsZero() {
			t.add("total", "", minutes(last.Sub(runStart)), "")
		}
		t.write(w, "   ")
	}

	writePackages(w, pkgs)
	if noTests > 0 {
		fmt.Fprintf(w, "   packages without test files: %d\n", noTests)
	}
	if len(steps) == 0 && len(pkgs) == 0 {
		fmt.Fprintln(w, "   nothing recorded")
	}
	for _, r := range whys {
		why, err := strconv.Unquote(r.result)
		if err != nil {
			why = r.result
		}
		fmt.Fprintf(w, ">> why %s failed (%s)\n", r.pkg, r.step)
		for _, l := range strings.Split(why, "\n") {
			fmt.Fprintln(w, "   "+l)
		}
	}
}

// tested is a package's row, and the CPU time of its binary when
// testtimes exec ran it (cpu < 0: not known).
type tested struct {
	row
	cpu float64
}

// writePackages writes the table of pkgs, slowest first; with the CPU time
// of each that testtimes exec ran, and of those by step.
func writePackages(w io.Writer, pkgs []tested) {
	if len(pkgs) == 0 {
		return
	}
	slices.SortStableFunc(pkgs, func(a, b tested) int {
		if c := cmp.Compare(b.seconds, a.seconds); c != 0 {
			return c
		}
		return strings.Compare(a.step+" "+a.pkg, b.step+" "+b.pkg)
	})
	seconds := func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) + "s" }
	if !slices.ContainsFunc(pkgs, func(p tested) bool { return p.cpu >= 0 }) {
		fmt.Fprintln(w, ">> packages, slowest first (go test's time of each: its tests' run, not its build)")
		t := table{header: []string{"time", "result", "step", "package"}, right: []bool{true, false, false, false}}
		for _, p := range pkgs {
			t.add(seconds(p.seconds), p.result, p.step, p.pkg)
		}
		t.write(w, "   ")
		return
	}
	fmt.Fprintln(w, ">> packages, slowest first (go test's time of each: its tests' run, not its build;"+
		" CPU: of its test binary and the processes it waited for, and that over its time)")
	t := table{header: []string{"time", "CPU", "cores", "result", "step", "package"}, right: []bool{true, true, true, false, false, false}}
	var steps []string
	byStep := map[string]float64{}
	for _, p := range pkgs {
		cpu, cores := "", ""
		if p.cpu >= 0 {
			cpu = seconds(p.cpu)
			if p.seconds > 0 {
				cores = strconv.FormatFloat(p.cpu/p.seconds, 'f', 2, 64)
			}
			if _, ok := byStep[p.step]; !ok {
				steps = append(steps, p.step)
			}
			byStep[p.step] += p.cpu
		}
		t.add(seconds(p.seconds), cpu, cores, p.result, p.step, p.pkg)
	}
	t.write(w, "   ")
	slices.SortStableFunc(steps, func(a, b string) int { return cmp.Compare(byStep[b], byStep[a]) })
	parts := make([]string, len(steps))
	all := 0.0
	for i, s := range steps {
		parts[i] = s + " " + minutes(time.Duration(byStep[s]*float64(time.Second)))
		all += byStep[s]
	}
	fmt.Fprintf(w, "   CPU of the tests, by step: %s; in all %s\n", strings.Join(parts, ", "), minutes(time.Duration(all*float64(time.Second))))
}

// minutes formats a step's time: 14m02s, 41s.
func minutes(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	if s < 60 {
		return fmt.Sprintf("%ds", s)
	}
	return fmt.Sprintf("%dm%02ds", s/60, s%60)
}

// table is text in aligned columns.
type table struct {
	header []string
	right  []bool
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer, indent string) {
	widths := make([]int, len(t.header))
	for _, r := range append([][]string{t.header}, t.rows...) {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, r := range append([][]string{t.header}, t.rows...) {
		var b strings.Builder
		b.WriteString(indent)
		for i, c := range r {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", widths[i]-len(c))
			switch {
			case t.right[i]:
				b.WriteString(pad + c)
			case i == len(r)-1:
				b.WriteString(c)
			default:
				b.WriteString(c + pad)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}
