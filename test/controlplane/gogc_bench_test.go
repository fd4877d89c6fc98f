package controlplane_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flagplane/flagplane/test/controlplane"
	"github.com/flagplane/flagplane/test/internal/bigflagset"
)

// BenchmarkAPIServerGOGC measures what kube-apiserver spends on a
// FeatureFlag of 10,000 flags (some 900 KB) at Go's default GOGC and at
// controlplane.ProcessGOGC, each on a control plane of its own: the CPU of
// one status write (a write of the whole object to etcd, and its watch
// event), and the process's peak memory after them (VmHWM).
func BenchmarkAPIServerGOGC(b *testing.B) {
	log.SetLogger(logr.Discard())
	for _, gogc := range []string{"100", controlplane.ProcessGOGC} {
		b.Run("GOGC="+gogc, func(b *testing.B) {
			ctx := context.Background()
			cp, err := controlplane.Start(ctx, controlplane.Options{GOGC: gogc, NoControllerManager: true, Log: &bytes.Buffer{}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				if err := cp.Stop(); err != nil {
					b.Error(err)
				}
			})
			pid := pidOf(b, cp.Dir, "kube-apiserver")
			if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}); err != nil {
				b.Fatal(err)
			}
			ff := bigflagset.FlagSet("bench", "large", 10_000)
			if err := cp.Client.Create(ctx, ff); err != nil {
				b.Fatal(err)
			}
			before := cpuSeconds(b, pid)
			b.ResetTimer()
			for i := range b.N {
				meta.SetStatusCondition(&ff.Status.Conditions, metav1.Condition{
					Type: "Ready", Status: metav1.ConditionTrue, Reason: "Write" + strconv.Itoa(i), Message: "a benchmark's write",
				})
				if err := cp.Client.Status().Update(ctx, ff); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric((cpuSeconds(b, pid)-before)/float64(b.N), "apiserver-cpu-s/op")
			b.ReportMetric(peakMiB(b, pid), "apiserver-peak-MiB")
		})
	}
}

// pidOf is the pid of the process named name whose command line mentions
// dir.
func pidOf(b *testing.B, dir, name string) string {
	found, err := mentioning(dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range found {
		if pid, command, _ := strings.Cut(p, " "); command == name {
			return pid
		}
	}
	b.Fatalf("no %s mentions %s among %v", name, dir, found)
	return ""
}

// cpuSeconds is the user and system CPU time of process pid.
func cpuSeconds(b *testing.B, pid string) float64 {
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command name, which is in parentheses: utime
	// and stime are the 12th and 13th, in clock ticks (100 a second).
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("reading /proc/%s/stat: %v %v", pid, err1, err2)
	}
	return (utime + stime) / 100
}

// peakMiB is the peak resident memory of process pid (VmHWM).
func peakMiB(b *testing.B, pid string) float64 {
	status, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib float64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%f kB", &kib); err != nil {
				b.Fatal(err)
			}
			return kib / 1024
		}
	}
	b.Fatalf("no VmHWM in /proc/%s/status", pid)
	return 0
}
