package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"buf.build/gen/go/open-feature/flagd/grpc/go/flagd/sync/v1/syncv1grpc"
	syncv1 "buf.build/gen/go/open-feature/flagd/protocolbuffers/go/flagd/sync/v1"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/topology"
)

// fakeSyncAddress is where every pod's flagd sync service is: the pods'
// IP (127.0.0.1) and flagd's sync port, which the manager asks what each
// pod serves.
const fakeSyncAddress = "127.0.0.1:8015"

// fakeSync is the flagd sync service of every pod: it serves, of each
// flag set, what the generated ConfigMap of its first consumer namespace
// holds (as a kubelet would have projected it at once), each flag with the
// flag set's metadata merged into its own, as flagd does; and counts the
// reads.
type fakeSync struct {
	syncv1grpc.UnimplementedFlagSyncServiceServer
	srv   *grpc.Server
	reads atomic.Int64
	mu    sync.Mutex
	// flags are, by flag set, its flags as flagd would hold them.
	flags map[topology.Key]map[string]any
}

func newFakeSync() (*fakeSync, error) {
	l, err := net.Listen("tcp", fakeSyncAddress)
	if err != nil {
		return nil, fmt.Errorf("the pods' flagd sync service (%s): %w: the bench needs flagd's sync port free on this machine", fakeSyncAddress, err)
	}
	f := &fakeSync{srv: grpc.NewServer(), flags: map[topology.Key]map[string]any{}}
	syncv1grpc.RegisterFlagSyncServiceServer(f.srv, f)
	go func() { _ = f.srv.Serve(l) }()
	return f, nil
}

func (f *fakeSync) close() { f.srv.Stop() }

// FetchAllFlags answers what every pod serves.
func (f *fakeSync) FetchAllFlags(context.Context, *syncv1.FetchAllFlagsRequest) (*syncv1.FetchAllFlagsResponse, error) {
	f.reads.Add(1)
	f.mu.Lock()
	all := map[string]any{}
	for k, flags := range f.flags {
		for key, flag := range flags {
			// flagd keys flags by flag set; keys of two flag sets never meet.
			all[k.Namespace+"/"+k.Name+"/"+key] = flag
		}
	}
	f.mu.Unlock()
	b, err := json.Marshal(map[string]any{"flags": all})
	if err != nil {
		return nil, err
	}
	return &syncv1.FetchAllFlagsResponse{FlagConfiguration: string(b)}, nil
}

// follow keeps, until ctx ends, what the pods serve of each flag set of
// tenants: what the ConfigMap of its first consumer namespace holds.
func (f *fakeSync) follow(ctx context.Context, c client.Client, tenants map[string][]string) {
	for {
		for t, names := range tenants {
			for _, name := range names {
				k := topology.FlagSetKey("flags-"+t, name)
				var cm corev1.ConfigMap
				if err := c.Get(ctx, client.ObjectKey{Namespace: t + "-0000", Name: topology.ConfigMapName(k)}, &cm); err != nil {
					continue
				}
				var doc struct {
					Flags    map[string]map[string]any `json:"flags"`
					Metadata map[string]any            `json:"metadata"`
				}
				if json.Unmarshal([]byte(cm.Data[topology.ConfigMapDataKey(k)]), &doc) != nil {
					continue
				}
				flags := map[string]any{}
				for key, flag := range doc.Flags {
					md := maps.Clone(doc.Metadata)
					if md == nil {
						md = map[string]any{}
					}
					if own, ok := flag["metadata"].(map[string]any); ok {
						maps.Copy(md, own)
					}
					flag["metadata"] = md
					flags[key] = flag
				}
				f.mu.Lock()
				f.flags[k] = flags
				f.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}
