// Command benchtable runs the topology benchmarks and prints them as a
// markdown table: the cost of each informer event at each cluster size, how
// it grows with the size, and how it compares with a full policy-machinery
// rebuild of the same event.
//
//	go run ./hack/benchtable [-benchtime 4x] [-rebuild-benchtime 1x] [-sizes 1000,10000,100000]
//
// An incremental benchmark op is a batch of events (see the events/op
// metric), so even -benchtime 1x measures a few hundred events; a rebuild op
// is one event. The progress of `go test` goes to stderr, the table to stdout.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Targets from the issue: per-event cost at the largest size within this
// factor of the smallest, and at least this many times faster than a full
// rebuild at the middle size.
const (
	maxGrowth       = 3.0
	minSpeedupAt10k = 1000.0
	speedupSize     = 10000
)

func main() {
	benchtime := flag.String("benchtime", "4x", "go test -benchtime for the incremental and build benchmarks (one op is a batch of events)")
	runs := flag.Int("count", 5, "go test -count for the incremental and build benchmarks; the table shows the fastest run, the one least disturbed by the rest of the machine")
	rebuildBenchtime := flag.String("rebuild-benchtime", "1x", "go test -benchtime for the rebuild benchmarks (one op is one event and one full rebuild)")
	sizes := flag.String("sizes", "1000,10000,100000", "cluster sizes in object nodes")
	rebuildMax := flag.Int("rebuild-max-nodes", speedupSize, "largest size to rebuild at (a policy-machinery rebuild is quadratic: minutes at 100k)")
	strict := flag.Bool("strict", false, "exit with status 1 when a target is missed")
	flag.Parse()

	args := []string{"-bench-sizes", *sizes, "-bench-rebuild-max-nodes", strconv.Itoa(*rebuildMax)}
	incremental, err := run("^Benchmark(Incremental|Build)$", *benchtime, *runs, args)
	if err != nil {
		fatal(err)
	}
	rebuild, err := run("^BenchmarkRebuild$", *rebuildBenchtime, 1, args)
	if err != nil {
		fatal(err)
	}
	ok := report(os.Stdout, incremental, rebuild, fmt.Sprintf("-benchtime %s -count %d -rebuild-benchtime %s -sizes %s -rebuild-max-nodes %d",
		*benchtime, *runs, *rebuildBenchtime, *sizes, *rebuildMax))
	if !ok && *strict {
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "benchtable:", err)
	os.Exit(2)
}

// result is one benchmark: Incremental/<event>, Rebuild/<event> or Build.
type result struct {
	name    string
	nodes   int
	metrics map[string]float64 // unit → value per op
}

// perEvent divides a per-op metric by the events of an op.
func (r result) perEvent(unit string) float64 {
	events := r.metrics["events/op"]
	if events == 0 {
		events = 1
	}
	return r.metrics[unit] / events
}

// lineRE matches BenchmarkIncremental/nodes=1000/source-create-2 and
// BenchmarkBuild/nodes=1000-2 lines.
var lineRE = regexp.MustCompile(`^Benchmark(\w+)/nodes=(\d+)(?:/(\S+?))?(?:-\d+)?\s+\d+\s+(.*)$`)

// run runs go test on the topology package and parses its benchmark lines,
// keeping the fastest of the -count runs of each benchmark.
func run(pattern, benchtime string, count int, args []string) ([]result, error) {
	cmdArgs := append([]string{"test", "-run", "^$", "-bench", pattern, "-benchmem", "-benchtime", benchtime,
		"-count", strconv.Itoa(count), "-timeout", "60m", "./topology/", "-args"}, args...)
	cmd := exec.Command("go", cmdArgs...)
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, os.Stderr)
	cmd.Stderr = os.Stderr
	fmt.Fprintln(os.Stderr, "+ go", strings.Join(cmdArgs, " "))
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("running go test -bench %s: %w", pattern, err)
	}
	var results []result
	index := map[string]int{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		m := lineRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		r := result{name: m[1], nodes: n, metrics: map[string]float64{}}
		if m[3] != "" {
			r.name += "/" + m[3]
		}
		fields := strings.Fields(m[4])
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("parsing %q: %w", sc.Text(), err)
			}
			r.metrics[fields[i+1]] = v
		}
		id := fmt.Sprintf("%s/%d", r.name, r.nodes)
		if i, seen := index[id]; !seen {
			index[id] = len(results)
			results = append(results, r)
		} else if r.perEvent("ns/op") < results[i].perEvent("ns/op") {
			results[i] = r
		}
	}
	return results, sc.Err()
}

// report prints the tables and tells whether every target was met.
func report(w io.Writer, incremental, rebuild []result, flags string) bool {
	rebuilds := map[string]result{}
	rebuiltAtSpeedupSize := false
	for _, r := range rebuild {
		rebuiltAtSpeedupSize = rebuiltAtSpeedupSize || r.nodes == speedupSize
		rebuilds[fmt.Sprintf("%s/%d", strings.TrimPrefix(r.name, "Rebuild/"), r.nodes)] = r
	}
	byEvent := map[string][]result{}
	var events []string
	var builds []result
	for _, r := range incremental {
		if r.name == "Build" {
			builds = append(builds, r)
			continue
		}
		ev := strings.TrimPrefix(r.name, "Incremental/")
		if _, seen := byEvent[ev]; !seen {
			events = append(events, ev)
		}
		byEvent[ev] = append(byEvent[ev], r)
	}

	fmt.Fprintf(w, "Reproduce: `go run ./hack/benchtable %s`.\n\n", flags)
	fmt.Fprintln(w, "| event | nodes | ns/event | B/event | allocs/event | × smallest size | full rebuild ns/event | rebuild B/event | rebuild ÷ incremental |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	ok := true
	var growthMisses, speedupMisses []string
	for _, ev := range events {
		rs := byEvent[ev]
		slices.SortFunc(rs, func(a, b result) int { return a.nodes - b.nodes })
		base := rs[0].perEvent("ns/op")
		for i, r := range rs {
			ns := r.perEvent("ns/op")
			growth := ns / base
			row := fmt.Sprintf("| %s | %s | %s | %s | %.0f | %.2f× |", ev, count(r.nodes), count(int(ns)), count(int(r.perEvent("B/op"))), r.perEvent("allocs/op"), growth)
			if rb, found := rebuilds[fmt.Sprintf("%s/%d", ev, r.nodes)]; found {
				speedup := rb.perEvent("ns/op") / ns
				row += fmt.Sprintf(" %s | %s | %s× |", count(int(rb.perEvent("ns/op"))), count(int(rb.perEvent("B/op"))), count(int(speedup)))
				if r.nodes == speedupSize && speedup < minSpeedupAt10k {
					speedupMisses = append(speedupMisses, fmt.Sprintf("%s (%.0f×)", ev, speedup))
				}
			} else {
				row += " not run | | |"
			}
			fmt.Fprintln(w, row)
			if i == len(rs)-1 && growth > maxGrowth {
				growthMisses = append(growthMisses, fmt.Sprintf("%s (%.2f×)", ev, growth))
			}
		}
	}

	if len(builds) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| build from scratch | graph nodes | ms | retained heap per graph node |")
		fmt.Fprintln(w, "|---|--:|--:|--:|")
		for _, b := range builds {
			fmt.Fprintf(w, "| %s objects | %s | %.1f | %s B |\n", count(b.nodes), count(int(b.metrics["graph-nodes"])), b.metrics["ns/op"]/1e6, count(int(b.metrics["retained-B/node"])))
		}
	}

	fmt.Fprintln(w)
	if len(growthMisses) == 0 {
		fmt.Fprintf(w, "- Target met: per-event cost at the largest size within %.0f× of the smallest, for every event.\n", maxGrowth)
	} else {
		ok = false
		fmt.Fprintf(w, "- Target MISSED: per-event cost at the largest size more than %.0f× the smallest: %s.\n", maxGrowth, strings.Join(growthMisses, ", "))
	}
	switch {
	case !rebuiltAtSpeedupSize:
		fmt.Fprintf(w, "- Rebuild comparison at %s nodes not run.\n", count(speedupSize))
	case len(speedupMisses) == 0:
		fmt.Fprintf(w, "- Target met: at %s nodes every event is at least %s× faster than a full rebuild.\n", count(speedupSize), count(int(minSpeedupAt10k)))
	default:
		ok = false
		fmt.Fprintf(w, "- Target MISSED: at %s nodes less than %s× faster than a full rebuild: %s.\n", count(speedupSize), count(int(minSpeedupAt10k)), strings.Join(speedupMisses, ", "))
	}
	return ok
}

// count writes an integer with thousands separators.
func count(n int) string {
	s := strconv.Itoa(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
