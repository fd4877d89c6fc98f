package main

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/test/fakesync"
	"github.com/flagplane/flagplane/topology"
)

// fakeSyncAddress is where every pod's flagd sync service is: the pods'
// IP (127.0.0.1) and flagd's sync port, which the manager asks what each
// pod serves.
const fakeSyncAddress = "127.0.0.1:8015"

// fakeSync is the flagd sync service of every pod: it serves, of each
// flag set, what the generated ConfigMap of its first consumer namespace
// holds (as a kubelet would have projected it at once), as flagd's store
// would hold it; and counts the reads.
type fakeSync struct {
	srv *fakesync.Server
	mu  sync.Mutex
	// flags are, by flag set, its flags as flagd would hold them.
	flags map[topology.Key]map[string]any
}

func newFakeSync() (*fakeSync, error) {
	l, err := net.Listen("tcp", fakeSyncAddress)
	if err != nil {
		return nil, fmt.Errorf("the pods' flagd sync service (%s): %w: the bench needs flagd's sync port free on this machine", fakeSyncAddress, err)
	}
	f := &fakeSync{flags: map[topology.Key]map[string]any{}}
	f.srv = fakesync.Serve(l, f.all)
	return f, nil
}

func (f *fakeSync) close() { f.srv.Stop() }

func (f *fakeSync) reads() int64 { return f.srv.Reads.Load() }

// all is what every pod serves: every flag set's flags, under keys of
// their own (flagd keys flags by flag set; two flag sets' keys never meet).
func (f *fakeSync) all() (map[string]any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]any{}
	for k, flags := range f.flags {
		for key, flag := range flags {
			out[k.Namespace+"/"+k.Name+"/"+key] = flag
		}
	}
	return out, nil
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
				flags, err := fakesync.StoreFlags([]byte(cm.Data[topology.ConfigMapDataKey(k)]))
				if err != nil {
					continue
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
