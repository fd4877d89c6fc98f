// Package fakesync serves flagd's sync service (flagd.sync.v1
// FlagSyncService/FetchAllFlags) from flagd documents, for the benches
// and tests that stand in for a pod's flagd: it answers what flagd's store
// would hold of them, each flag with its flag set's metadata merged into
// its own, as flagd v0.16 does.
package fakesync

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"sync/atomic"

	"buf.build/gen/go/open-feature/flagd/grpc/go/flagd/sync/v1/syncv1grpc"
	syncv1 "buf.build/gen/go/open-feature/flagd/protocolbuffers/go/flagd/sync/v1"
	"google.golang.org/grpc"
)

// StoreFlags is what flagd's store holds of a flagd document: its flags,
// each with the document's metadata merged under its own.
func StoreFlags(doc []byte) (map[string]any, error) {
	var d struct {
		Flags    map[string]map[string]any `json:"flags"`
		Metadata map[string]any            `json:"metadata"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	out := make(map[string]any, len(d.Flags))
	for key, flag := range d.Flags {
		md := maps.Clone(d.Metadata)
		if md == nil {
			md = map[string]any{}
		}
		if own, ok := flag["metadata"].(map[string]any); ok {
			maps.Copy(md, own)
		}
		flag["metadata"] = md
		out[key] = flag
	}
	return out, nil
}

// Server answers FetchAllFlags with what flags gives, and counts the calls.
type Server struct {
	syncv1grpc.UnimplementedFlagSyncServiceServer
	// Reads counts the FetchAllFlags calls.
	Reads atomic.Int64
	flags func() (map[string]any, error)
	srv   *grpc.Server
}

// Serve serves on l until Stop.
func Serve(l net.Listener, flags func() (map[string]any, error)) *Server {
	s := &Server{flags: flags, srv: grpc.NewServer()}
	syncv1grpc.RegisterFlagSyncServiceServer(s.srv, s)
	go func() { _ = s.srv.Serve(l) }()
	return s
}

// Stop stops serving.
func (s *Server) Stop() { s.srv.Stop() }

// FetchAllFlags answers {"flags": ...}.
func (s *Server) FetchAllFlags(context.Context, *syncv1.FetchAllFlagsRequest) (*syncv1.FetchAllFlagsResponse, error) {
	s.Reads.Add(1)
	flags, err := s.flags()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(map[string]any{"flags": flags})
	if err != nil {
		return nil, err
	}
	return &syncv1.FetchAllFlagsResponse{FlagConfiguration: string(b)}, nil
}
