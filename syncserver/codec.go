package syncserver

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	protobuf "google.golang.org/protobuf/proto"

	syncv1 "buf.build/gen/go/open-feature/flagd/protocolbuffers/go/flagd/sync/v1"
)

// encodedResponse is a SyncFlagsResponse encoded once for all the
// subscribers of a flag set, as the buffers gRPC writes: fan-out then costs
// no encoding and no allocation per subscriber. gRPC only reads the
// buffers, and freeing a SliceBuffer does nothing, so every stream may send
// the same one.
type encodedResponse struct{ data mem.BufferSlice }

func encodeResponse(content string) (*encodedResponse, error) {
	b, err := protobuf.Marshal(&syncv1.SyncFlagsResponse{FlagConfiguration: content})
	if err != nil {
		return nil, err
	}
	return &encodedResponse{data: mem.BufferSlice{mem.SliceBuffer(b)}}, nil
}

// sharedCodec is gRPC's proto codec, except that it sends an
// encodedResponse as it is.
type sharedCodec struct{ encoding.CodecV2 }

func newSharedCodec() sharedCodec { return sharedCodec{encoding.GetCodecV2(proto.Name)} }

func (c sharedCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*encodedResponse); ok {
		return r.data, nil
	}
	return c.CodecV2.Marshal(v)
}
