package outbound

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"buf.build/gen/go/open-feature/flagd/grpc/go/flagd/sync/v1/syncv1grpc"
	syncv1 "buf.build/gen/go/open-feature/flagd/protocolbuffers/go/flagd/sync/v1"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
)

// fakeSync is a flagd sync service whose FetchAllFlags answers content,
// after delay.
type fakeSync struct {
	syncv1grpc.UnimplementedFlagSyncServiceServer
	content string
	delay   time.Duration
}

func (f *fakeSync) FetchAllFlags(ctx context.Context, _ *syncv1.FetchAllFlagsRequest) (*syncv1.FetchAllFlagsResponse, error) {
	select {
	case <-time.After(f.delay):
	case <-ctx.Done():
		// The caller's deadline, which gRPC passes on, may end here a
		// moment before it ends at the caller: an answer sent now would
		// be taken for flagd's.
		return nil, ctx.Err()
	}
	return &syncv1.FetchAllFlagsResponse{FlagConfiguration: f.content}, nil
}

func serveSync(t *testing.T, f *fakeSync) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	syncv1grpc.RegisterFlagSyncServiceServer(s, f)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// TestFetchFlags: the answer of a flagd sync service, bounded in time and
// bytes; a black hole, a refusal and a peer that is no gRPC server cost
// ReadTimeout at most, with short errors.
func TestFetchFlags(t *testing.T) {
	g := NewWithT(t)
	o := New(Client{ReadTimeout: 300 * time.Millisecond, MaxBytes: 1000})
	ctx := context.Background()

	got, err := o.FetchFlags(ctx, serveSync(t, &fakeSync{content: `{"flags":{}}`}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(got)).To(Equal(`{"flags":{}}`))

	_, err = o.FetchFlags(ctx, serveSync(t, &fakeSync{content: strings.Repeat("x", 2000)}))
	g.Expect(err).To(MatchError(ErrTooLarge))

	slow := serveSync(t, &fakeSync{delay: time.Minute})
	began := time.Now()
	_, err = o.FetchFlags(ctx, slow)
	g.Expect(err).To(MatchError("no answer within 300ms"))
	g.Expect(time.Since(began)).To(BeNumerically("<", 5*time.Second))

	// Accepts, and never says a word.
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer hole.Close()
	go func() {
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	began = time.Now()
	_, err = o.FetchFlags(ctx, hole.Addr().String())
	g.Expect(err).To(MatchError("no answer within 300ms"))
	g.Expect(time.Since(began)).To(BeNumerically("<", 5*time.Second))

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := closed.Addr().String()
	g.Expect(closed.Close()).To(Succeed())
	_, err = o.FetchFlags(ctx, addr)
	g.Expect(err).To(MatchError("connection refused"))
	g.Expect(err.Error()).NotTo(ContainSubstring(addr))

	// An HTTP/1 server (an app's own port): an error, never an answer.
	web, _ := counting(t, nil)
	_, err = o.FetchFlags(ctx, strings.TrimPrefix(web.URL, "http://"))
	g.Expect(err).To(HaveOccurred())
}
