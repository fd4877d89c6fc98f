package node

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
)

func TestRewriteFlagdArgs(t *testing.T) {
	// Declared container ports map to 2xxxx; anything else is allocated
	// on demand as 3xxxx.
	mapPort := func(p int32) (int, error) {
		switch p {
		case 8013, 8014, 8015, 8016:
			return 20000 + int(p), nil
		}
		return 30000 + int(p), nil
	}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{{
		name: "the injected sidecar's arguments; the ports it leaves at their defaults are made explicit",
		args: []string{"start", "--management-port", "8014", "--port", "8013", "--sources", `[{"uri":"/etc/flagd/a/b.json"}]`},
		want: []string{"start", "--management-port", "28014", "--port", "28013", "--sources", `[{"uri":"/etc/flagd/a/b.json"}]`,
			"--sync-port=28015", "--ofrep-port=28016"},
	}, {
		name: "the = form and short flags",
		args: []string{"start", "--port=8013", "-m=8014", "-g8015", "-r", "9000"},
		want: []string{"start", "--port=28013", "-m=28014", "-g28015", "-r", "39000"},
	}, {
		name: "a default taken from FLAGD_*_PORT",
		args: []string{"start", "--port", "8013", "--management-port", "8014", "--sync-port", "8015"},
		env:  map[string]string{"FLAGD_OFREP_PORT": "7777"},
		want: []string{"start", "--port", "28013", "--management-port", "28014", "--sync-port", "28015", "--ofrep-port=37777"},
	}, {
		name: "--metrics-port of older releases is rewritten where present",
		args: []string{"start", "--metrics-port", "8014", "-p", "8013", "-m", "8014", "-g", "8015", "-r", "8016"},
		want: []string{"start", "--metrics-port", "28014", "-p", "28013", "-m", "28014", "-g", "28015", "-r", "28016"},
	}, {
		name: "not a start command: nothing appended",
		args: []string{"version"},
		want: []string{"version"},
	}, {
		name: "a value that is not a number is left for flagd to refuse",
		args: []string{"start", "--port", "abc", "--management-port", "8014", "--sync-port", "8015", "--ofrep-port", "8016"},
		want: []string{"start", "--port", "abc", "--management-port", "28014", "--sync-port", "28015", "--ofrep-port", "28016"},
	}, {
		name: "similar flags are not port flags",
		args: []string{"start", "--portal", "8013", "-px", "--port", "8013", "-m", "8014", "-g", "8015", "-r", "8016"},
		want: []string{"start", "--portal", "8013", "-px", "--port", "28013", "-m", "28014", "-g", "28015", "-r", "28016"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := rewriteFlagdArgs(tc.args, tc.env, mapPort)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestRewriteFlagdArgsReportsAllocationFailures(t *testing.T) {
	g := NewWithT(t)
	_, err := rewriteFlagdArgs([]string{"start"}, nil, func(int32) (int, error) { return 0, fmt.Errorf("no port") })
	g.Expect(err).To(MatchError("no port"))
}

func TestRewriteEnvPorts(t *testing.T) {
	g := NewWithT(t)
	declared := func(p int32) (int, bool) {
		if p == 8013 {
			return 28013, true
		}
		return 0, false
	}
	env := []envVar{
		{"FLAGD_PORT", "8013"},            // declared: rewritten
		{"FLAGD_MANAGEMENT_PORT", "8014"}, // not declared by the pod: kept
		{"FLAGD_HOST", "8013"},            // not a _PORT variable
		{"OTHER_PORT", "x8013"},           // not a number
	}
	rewriteEnvPorts(env, declared)
	g.Expect(env).To(Equal([]envVar{{"FLAGD_PORT", "28013"}, {"FLAGD_MANAGEMENT_PORT", "8014"}, {"FLAGD_HOST", "8013"}, {"OTHER_PORT", "x8013"}}))
}

func TestPortAllocatorAvoidsTheEphemeralRange(t *testing.T) {
	g := NewWithT(t)
	a := newPortAllocator()
	seen := map[int]bool{}
	for range 20 {
		p, l, err := a.allocate()
		g.Expect(err).NotTo(HaveOccurred())
		defer l.Close()
		g.Expect(p).To(And(BeNumerically(">=", a.lo), BeNumerically("<", a.hi)))
		g.Expect(seen).NotTo(HaveKey(p))
		seen[p] = true
	}
}
