package sizes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/syncserver"
	"github.com/flagplane/flagplane/test/flagdapi"
	"github.com/flagplane/flagplane/test/freeport"
	"github.com/flagplane/flagplane/test/internal/child"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

// The limit of provider flagd-proxy is the receiving side's: flagd's gRPC
// sync client takes what gRPC-Go takes by default, and flagplane writes no
// maxMsgSize into the sidecar's --sources. The API server's storage takes
// no FeatureFlag that large (etcd refuses requests over 1.5 MiB by
// default), so the sync server here runs in process, over a graph of its
// own, with its send limit raised past flagd's receive limit.
var _ = Describe("the sync message limit of the real flagd", func() {
	It("takes a message of exactly 4 MiB, refuses one byte more, and takes more only with a --sources maxMsgSize", func(ctx SpecContext) {
		topo := topology.New(flagsets.NewValidator(false).TopologyOptions()...)
		fits := sizedFlagSet("shop", "fits", topology.SyncMaxMessageBytes)
		over := sizedFlagSet("shop", "over", topology.SyncMaxMessageBytes+1)
		for _, ff := range []*v1beta1.FeatureFlag{fits, over} {
			_, err := topo.UpsertFlagSet(ff)
			Expect(err).NotTo(HaveOccurred())
			r, _ := topo.Snapshot().FlagSetRendered(topology.FlagSetKey(ff.Namespace, ff.Name))
			Expect(r.Valid()).To(BeTrue(), "%v", r.Err)
		}
		addr := startSyncServer(ctx, topo, 8<<20)

		exact := startFlagd(ctx, addr, fits, 0)
		Eventually(exact.evaluates(flagKey(0))).Should(Equal(true), "a message of %d bytes", topology.SyncMaxMessageBytes)

		oneMore := startFlagd(ctx, addr, over, 0)
		Eventually(oneMore.output).Should(ContainSubstring(fmt.Sprintf("received message larger than max (%d vs. %d)",
			topology.SyncMaxMessageBytes+1, topology.SyncMaxMessageBytes)))
		Consistently(oneMore.answer(flagKey(0))).Should(Equal("flagd answers not_found"), "flagd has no flags")
		for _, line := range strings.Split(oneMore.output(), "\n") {
			if strings.Contains(line, "larger than max") {
				AddReportEntry("flagd, sent one byte more", line)
				break
			}
		}

		raised := startFlagd(ctx, addr, over, 8<<20)
		Eventually(raised.evaluates(flagKey(0))).Should(Equal(true), "with maxMsgSize")
	})

	It("is the sync server's default send limit: a larger flag set is not sent, and flagd keeps what it had", func(ctx SpecContext) {
		topo := topology.New(flagsets.NewValidator(false).TopologyOptions()...)
		ff := sizedFlagSet("shop", "grows", 1<<20)
		_, err := topo.UpsertFlagSet(ff)
		Expect(err).NotTo(HaveOccurred())
		srv, addr := newSyncServer(ctx, topo, 0)
		f := startFlagd(ctx, addr, ff, 0)
		Eventually(f.evaluates(flagKey(0))).Should(Equal(true))

		grown := sizedFlagSet("shop", "grows", topology.SyncMaxMessageBytes+1)
		for k, flag := range grown.Spec.FlagSpec.Flags {
			flag.DefaultVariant = "off"
			grown.Spec.FlagSpec.Flags[k] = flag
		}
		d, err := topo.UpsertFlagSet(grown)
		Expect(err).NotTo(HaveOccurred())
		srv.FlagSetsChanged(d.Of(topology.KindFlagSet))
		Consistently(f.evaluates(flagKey(0))).Should(Equal(true), "the last content that fitted")
		Expect(f.output()).NotTo(ContainSubstring("larger than max"), "nothing too large was sent")
	})
})

// sizedFlagSet is a flag set whose sync message (topology.Rendered
// .SyncMessageSize) is exactly messageBytes: flags of about 480 bytes, and
// a flag-set metadata string that makes up the rest.
func sizedFlagSet(ns, name string, messageBytes int) *v1beta1.FeatureFlag {
	GinkgoHelper()
	ff := flagSet(ns, name, messageBytes/1000, "on") // about half of it
	size := func(pad int) int {
		ff.Spec.FlagSpec.Metadata = []byte(`{"pad":"` + strings.Repeat("p", pad) + `"}`)
		return topology.Rendered{Content: rendered(ff)}.SyncMessageSize()
	}
	// The length's varint may grow a byte with the pad: settle it.
	pad := messageBytes - size(0)
	for range 3 {
		pad -= size(pad) - messageBytes
	}
	Expect(pad).To(BeNumerically(">=", 0))
	Expect(size(pad)).To(Equal(messageBytes))
	return ff
}

// staticIdentity lets every caller read the flag sets of namespace shop.
type staticIdentity struct{}

func (staticIdentity) Authenticate(context.Context, string) (syncserver.Identity, error) {
	return syncserver.Identity{Namespace: "shop"}, nil
}

// newSyncServer serves topo on a loopback port until the spec ends, with
// the given send limit (0: the default).
func newSyncServer(ctx SpecContext, topo *topology.Topology, maxMessage int) (*syncserver.Server, string) {
	GinkgoHelper()
	srv, err := syncserver.New(topo, syncserver.Options{Authenticator: staticIdentity{}, MaxMessageSize: maxMessage,
		Log: GinkgoLogr})
	Expect(err).NotTo(HaveOccurred())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	serveCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(serveCtx, lis) }()
	DeferCleanup(func() {
		cancel()
		Eventually(done).WithTimeout(30 * time.Second).Should(Receive(BeNil()))
	})
	return srv, lis.Addr().String()
}

func startSyncServer(ctx SpecContext, topo *topology.Topology, maxMessage int) string {
	GinkgoHelper()
	_, addr := newSyncServer(ctx, topo, maxMessage)
	return addr
}

// realFlagd is bin/flagd, run until the spec ends.
type realFlagd struct {
	port int
	mu   sync.Mutex
	out  bytes.Buffer
}

func (f *realFlagd) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.out.Write(p)
}

func (f *realFlagd) output() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.out.String()
}

// startFlagd runs flagd syncing ff from the sync server at addr over gRPC,
// as the injected sidecar does (maxMsgSize, when not 0, is a --sources
// field flagplane does not write).
func startFlagd(ctx SpecContext, addr string, ff *v1beta1.FeatureFlag, maxMsgSize int) *realFlagd {
	GinkgoHelper()
	entry := map[string]any{"uri": addr, "provider": "grpc", "selector": syncserver.Selector(topology.FlagSetKey(ff.Namespace, ff.Name)),
		"headers": syncserver.SidecarHeaders("any")}
	if maxMsgSize > 0 {
		entry["maxMsgSize"] = maxMsgSize
	}
	sources, err := json.Marshal([]any{entry})
	Expect(err).NotTo(HaveOccurred())
	ports, err := freeport.Ports(4)
	Expect(err).NotTo(HaveOccurred())
	f := &realFlagd{port: ports[0]}
	cmd := exec.Command(flagdBinary, "start", "--port", strconv.Itoa(ports[0]), "--management-port", strconv.Itoa(ports[1]),
		"--sync-port", strconv.Itoa(ports[2]), "--ofrep-port", strconv.Itoa(ports[3]), "--sources", string(sources))
	cmd.Stdout, cmd.Stderr = f, f
	p, err := child.Start(cmd)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		_, _ = p.Stop(10 * time.Second)
		if CurrentSpecReport().Failed() {
			AddReportEntry("flagd output", f.output())
		}
	})
	Eventually(func() (int, error) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[1]))
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}).WithTimeout(20*time.Second).Should(Equal(http.StatusOK), func() string { return f.output() })
	return f
}

// evaluates returns what flagd evaluates a boolean flag to.
func (f *realFlagd) evaluates(key string) func() (any, error) {
	return func() (any, error) {
		e, err := flagdapi.Resolve(context.Background(), "127.0.0.1:"+strconv.Itoa(f.port), flagdapi.Boolean, key, nil)
		if err != nil {
			return nil, err
		}
		if e.Code != "" {
			return nil, fmt.Errorf("flagd answers %s", e.Code)
		}
		return e.Value, nil
	}
}

// answer is what flagd answers for a boolean flag: its value, or its error.
func (f *realFlagd) answer(key string) func() any {
	return func() any {
		v, err := f.evaluates(key)()
		if err != nil {
			return err.Error()
		}
		return v
	}
}
