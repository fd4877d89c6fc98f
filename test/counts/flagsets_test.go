package counts

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
)

// ownUser runs a source's flagd as a user of the spec's own: flagd holds
// one inotify instance per file source, and Linux counts them per user
// across the machine, where other tests' flagd sidecars run as the
// injected user (65532) too. The operator of this suite allows the
// override (world_test.go).
func ownUser(uid int64) func(*v1beta1.FeatureFlagSource) {
	return func(s *v1beta1.FeatureFlagSource) {
		s.Annotations = map[string]string{injection.AnnotationSidecarSecurityContext: fmt.Sprintf(`{"runAsUser": %d, "runAsGroup": %d}`, uid, uid)}
	}
}

// inotifyInstances counts the inotify instances a process holds.
func inotifyInstances(pid int) int {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	count := 0
	for _, fd := range fds {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); l == "anon_inode:inotify" {
			count++
		}
	}
	return count
}

var _ = Describe("a source naming 100 flag sets", func() {
	// Before: the schema refused a source of more than 32 entries ("Too
	// many: 100: must have at most 32 items"), which the OpenFeature
	// Operator's does not.
	for _, tc := range []struct {
		provider v1beta1.SyncProviderType
		mutate   []func(*v1beta1.FeatureFlagSource)
		ready    time.Duration
	}{
		{v1beta1.SyncProviderFile, []func(*v1beta1.FeatureFlagSource){ownUser(41100)}, time.Minute},
		// flagd's kubernetes sync starts an informer per entry: 100 LISTs
		// and watches under client-go's default rate limit (5 per second).
		{v1beta1.SyncProviderKubernetes, nil, 3 * time.Minute},
		{v1beta1.SyncProviderFlagdProxy, nil, time.Minute},
	} {
		It(fmt.Sprintf("is admitted with the %s provider; the pod gets all 100, and flagd serves a flag of the 100th", tc.provider), func(ctx SpecContext) {
			ns := newNamespace(ctx, "")
			flagSets(ctx, ns, 100, shortName)
			src := fixtures.Source(ns, "hundred", entries(tc.provider, 0, 100, shortName), append(tc.mutate, fixtures.Targeting("Deployment", "web"))...)
			took := timedCall(ctx, sourceWebhook, func() { create(ctx, src) })
			AddReportEntry(fmt.Sprintf("FeatureFlagSource of 100 %s entries: admission webhook", tc.provider), took.String())
			create(ctx, deployment(ns, "web", nil))

			pod := readyPod(ctx, ns, "web", injected(), tc.ready)
			flagd := sidecarOf(pod)
			Expect(sourcesOf(flagd)).To(HaveLen(100))
			longest := 0
			for _, a := range flagd.Args {
				longest = max(longest, len(a))
			}
			AddReportEntry(fmt.Sprintf("pod of 100 %s flag sets", tc.provider), fmt.Sprintf("%d bytes (protobuf), longest argument %d bytes, %d volumes",
				pod.Size(), longest, len(pod.Spec.Volumes)))
			if tc.provider == v1beta1.SyncProviderFile {
				Expect(pod.Spec.Volumes).To(ContainElement(HaveField("ConfigMap.Name", topology.ConfigMapName(topology.FlagSetKey(ns, shortName(99))))))
				// Besides the service-account token's, which admission adds.
				Expect(flagd.VolumeMounts).To(HaveLen(101))
				Expect(flagd.VolumeMounts).To(ContainElement(HaveField("MountPath", injection.FlagMountDir(topology.FlagSetKey(ns, shortName(99))))))
				pid, ok := n.PID(client.ObjectKeyFromObject(pod), injection.SidecarName)
				Expect(ok).To(BeTrue())
				Expect(inotifyInstances(pid)).To(Equal(100), "flagd holds an inotify instance per file source")
			}
			addr := flagdAddr(pod)
			for _, i := range []int{0, 50, 99} {
				Eventually(resolve(addr, flagKey(i))).Should(Equal(on), "the flag of flag set %d", i)
			}
		})
	}

	It("warns of more file entries than inotify allows a user, and real flagd fails to start with them", func(ctx SpecContext) {
		raw, err := os.ReadFile("/proc/sys/fs/inotify/max_user_instances")
		Expect(err).NotTo(HaveOccurred())
		limit, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		Expect(err).NotTo(HaveOccurred())
		if limit >= 256 {
			Skip(fmt.Sprintf("this machine allows %d inotify instances per user, more than a source's 256 entries", limit))
		}
		ns := newNamespace(ctx, "")
		flagSets(ctx, ns, limit+1, shortName)
		src := fixtures.Source(ns, "many", entries(v1beta1.SyncProviderFile, 0, limit+1, shortName), ownUser(41101), fixtures.Targeting("Deployment", "web"))
		warned, err := createWarned(ctx, src)
		Expect(err).NotTo(HaveOccurred())
		Expect(warned).To(ContainElement(ContainSubstring(fmt.Sprintf("spec.sources: %d file entries: flagd holds an inotify instance for each", limit+1))))
		create(ctx, deployment(ns, "web", nil))

		// A user's inotify instances are all taken: flagd cannot start. The
		// pod judged is the injected one: a pod stored without flagd (let
		// through when the webhook did not answer in time, or admitted
		// before the manager saw the source) is Ready, and once the healer
		// rolls the Deployment it stays beside its successor, which never is.
		restarted := HaveField("Status.InitContainerStatuses", ContainElement(HaveField("RestartCount", BeNumerically(">", 0))))
		Eventually(podsOf(ctx, ns, "web")).WithTimeout(time.Minute).Should(ContainElement(And(injected(), restarted)))
		Expect(n.LogsOf(ns)).To(ContainSubstring("too many open files"))
		Consistently(podsOf(ctx, ns, "web")).WithTimeout(3 * time.Second).ShouldNot(ContainElement(And(injected(), beReady())))
	})
})
