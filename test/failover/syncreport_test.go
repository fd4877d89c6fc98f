package failover

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"path/filepath"

	"buf.build/gen/go/open-feature/flagd/grpc/go/flagd/sync/v1/syncv1grpc"
	syncv1 "buf.build/gen/go/open-feature/flagd/protocolbuffers/go/flagd/sync/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/syncserver"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/test/freeport"
	"github.com/flagplane/flagplane/test/managerproc"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/status"
)

// Every replica serves sync streams; only the leader writes status. Each
// replica reports its streams in a ConfigMap of the manager's namespace,
// and the leader folds them: this holds that to two manager processes,
// with streams open on both, whichever of them leads.
var _ = Describe("Sync reports across replicas", func() {
	It("counts in a FeatureFlag's status the streams of every replica, and forgets a replica's when they end", func(ctx SpecContext) {
		keyFile := filepath.Join(workDir, "namespace-token-keys")
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		Expect(writeFile(keyFile, []byte(hex.EncodeToString(key)+"\n"))).To(Succeed())
		tokens, err := syncserver.ReadNamespaceTokenKeys(keyFile)
		Expect(err).NotTo(HaveOccurred())

		addrs := map[string]string{}
		for _, name := range []string{"replica-a", "replica-b"} {
			// A port picked here, not port 0: the check below that a ready
			// replica's sync server listens must not wait for it.
			addrs[name], err = freeport.Address()
			Expect(err).NotTo(HaveOccurred())
			proc, err := managerproc.Start(managerproc.Options{
				Binary: manager, Name: "sync-" + name, Kubeconfig: cp.KubeconfigPath, Dir: workDir,
				Args: []string{"--leader-elect", "--leader-election-namespace=" + leaseNamespace, "--leader-election-id=flagplane-sync-reports",
					"--webhooks=false", "--sync-bind-address=" + addrs[name], "--sync-namespace-token-key-file=" + keyFile},
				Env: []string{"POD_NAME=" + name},
			})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { _ = proc.Stop(); <-proc.Exited() })
			Expect(proc.WaitReady(ctx)).To(Succeed())
			// Ready means its sync server listens: a Service may send
			// subscribers to it.
			conn, err := net.Dial("tcp", addrs[name])
			Expect(err).NotTo(HaveOccurred(), "%s is ready, but its sync server does not listen", name)
			_ = conn.Close()
		}

		ns := "sync-reports"
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		ff := fixtures.FlagSet(ns, "flags", "off")
		Expect(k8s.Create(ctx, ff)).To(Succeed())

		// subscribe opens a stream as a workload of ns and reads the flag
		// set from it; a replica that is still starting refuses, and the
		// stream is opened again.
		subscribe := func(addr string) context.CancelFunc {
			GinkgoHelper()
			headers, err := tokens.HeadersFor(ns)
			Expect(err).NotTo(HaveOccurred())
			md := metadata.New(headers)
			md.Set(syncserver.SelectorHeader, syncserver.Selector(topology.FlagSetKey(ns, ff.Name)))
			var stop context.CancelFunc
			var stream grpc.ServerStreamingClient[syncv1.SyncFlagsResponse]
			Eventually(func() error {
				conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					return err
				}
				sctx, cancel := context.WithCancel(ctx)
				stop = func() { cancel(); _ = conn.Close() }
				if stream, err = syncv1grpc.NewFlagSyncServiceClient(conn).SyncFlags(metadata.NewOutgoingContext(sctx, md), &syncv1.SyncFlagsRequest{}); err == nil {
					_, err = stream.Recv() // the first message is the flag set: the stream is open
				}
				if err != nil {
					stop()
				}
				return err
			}).Should(Succeed())
			go func() {
				for {
					if _, err := stream.Recv(); err != nil {
						return
					}
				}
			}()
			return stop
		}
		By("one stream on replica-a, two on replica-b")
		subscribe(addrs["replica-a"])
		b1, b2 := subscribe(addrs["replica-b"]), subscribe(addrs["replica-b"])

		streams := func(want int32) func(Gomega) {
			return func(g Gomega) {
				got := &v1beta1.FeatureFlag{}
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ff), got)).To(Succeed())
				st := got.Status
				g.Expect(st.Revision).NotTo(BeEmpty())
				g.Expect(st.Consumers).To(ConsistOf(And(
					HaveField("Kind", status.KindSyncSubscribers), HaveField("Namespace", ns),
					HaveField("Revision", st.Revision), HaveField("Streams", want), HaveField("Current", want))))
				g.Expect(st.Delivered).To(Equal("1/1"))
			}
		}
		Eventually(streams(3)).Should(Succeed())
		reports := &corev1.ConfigMapList{}
		Expect(k8s.List(ctx, reports, client.InNamespace(leaseNamespace), client.MatchingLabels{status.SyncReportLabel: "true"})).To(Succeed())
		var names []string
		for _, r := range reports.Items {
			names = append(names, r.Name)
		}
		Expect(names).To(ConsistOf(syncserver.ReportName("replica-a"), syncserver.ReportName("replica-b")))

		By("replica-b's streams end: its report goes away, and so do they from the status")
		b1()
		b2()
		Eventually(streams(1)).Should(Succeed())
		Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: leaseNamespace, Name: syncserver.ReportName("replica-b")}, &corev1.ConfigMap{})
		}).Should(MatchError(ContainSubstring("not found")))
	})
})
