package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

func report(out io.Writer, o options, results []result) bool {
	fmt.Fprintf(out, "\n### Edit → every cluster Current\n\n")
	fmt.Fprintf(out, "| members | edits | hub status says: p50 | p99 | members are: p50 | p99 | every copy written: p50 | p99 | first placement → all Current |\n")
	fmt.Fprintf(out, "|---|---|---|---|---|---|---|---|---|\n")
	ok := true
	var verdict string
	for _, r := range results {
		var hub, mem, wrote []time.Duration
		for _, e := range r.edits {
			hub, mem, wrote = append(hub, e.hub), append(mem, e.members), append(wrote, e.written)
		}
		fmt.Fprintf(out, "| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", label(r), len(r.edits), ms(percentile(hub, 0.5)),
			ms(percentile(hub, 0.99)), ms(percentile(mem, 0.5)), ms(percentile(mem, 0.99)),
			ms(percentile(wrote, 0.5)), ms(percentile(wrote, 0.99)), ms(r.first))
		if r.simulated && r.n >= 1000 {
			p99 := max(percentile(hub, 0.99), percentile(mem, 0.99))
			ok = p99 < goalP99
			verdict = fmt.Sprintf("Goal, p99 under %s at %d members: %s (p99 %s, the slower of the two views).", goalP99, r.n,
				map[bool]string{true: "met", false: "missed"}[ok], ms(p99))
		}
	}
	fmt.Fprintf(out, "\n### The hub process: idle for %s once every member is Current\n\n", o.idle)
	fmt.Fprintf(out, "| members | RSS | heap in use (after GC) | CPU | per member: RSS | heap | CPU per minute | per member added to the first row's: RSS | heap |\n")
	fmt.Fprintf(out, "|---|---|---|---|---|---|---|---|---|\n")
	for i, r := range results {
		n := uint64(r.n)
		addRSS, addHeap := "", ""
		if first := results[0]; i > 0 && r.n > first.n {
			added := float64(r.n - first.n)
			addRSS = kib(uint64(max(0, (float64(r.idle.rss)-float64(first.idle.rss))/added)))
			addHeap = kib(uint64(max(0, (float64(r.idle.heap)-float64(first.idle.heap))/added)))
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", label(r), mib(r.idle.rss), mib(r.idle.heap), ms(r.idle.cpu),
			kib(r.idle.rss/n), kib(r.idle.heap/n), us(perMinute(r.idle.cpu, r.idle.length)/time.Duration(r.n)), addRSS, addHeap)
	}
	fmt.Fprintf(out, "\n### The hub process during the edits\n\n")
	fmt.Fprintf(out, "| members | edits over | peak RSS | peak heap in use | CPU | CPU per edit | per member: CPU per edit | peak heap |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		edits := max(len(r.edits), 1)
		perEdit := r.busy.cpu / time.Duration(edits)
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", label(r), r.busy.length.Round(time.Second),
			mib(r.busy.peakRSS), mib(r.busy.peakHeap), ms(r.busy.cpu), ms(perEdit), us(perEdit/time.Duration(r.n)),
			kib(r.busy.peakHeap/uint64(r.n)))
	}
	fmt.Fprintf(out, "\n### A halt reaching every cluster\n\n")
	fmt.Fprintf(out, "| members | halts | gate Confirmed for | edit → halted: p50 | halt → every copy stable: p50 | p99 | every member serves stable: p50 | p99 | hub says every cluster Current: p50 | p99 |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		var halted, wrote, mem, hub []time.Duration
		for _, h := range r.halts {
			halted, wrote, mem, hub = append(halted, h.halted), append(wrote, h.written), append(mem, h.members), append(hub, h.hub)
		}
		fmt.Fprintf(out, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", label(r), len(r.halts), r.haltFor, ms(percentile(halted, 0.5)),
			ms(percentile(wrote, 0.5)), ms(percentile(wrote, 0.99)), ms(percentile(mem, 0.5)), ms(percentile(mem, 0.99)),
			ms(percentile(hub, 0.5)), ms(percentile(hub, 0.99)))
	}
	if verdict != "" {
		fmt.Fprintf(out, "\n%s\n", verdict)
	}
	fmt.Fprintf(out, "Load average when done: %s\n", loadAverage())
	return ok
}

func perMinute(d, over time.Duration) time.Duration {
	if over <= 0 {
		return 0
	}
	return time.Duration(float64(d) * float64(time.Minute) / float64(over))
}

func ms(d time.Duration) string {
	return d.Round(time.Millisecond).String()
}

func us(d time.Duration) string {
	return d.Round(10 * time.Microsecond).String()
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func kib(b uint64) string { return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10)) }

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
