package syncserver

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	protobuf "google.golang.org/protobuf/proto"

	syncv1 "buf.build/gen/go/open-feature/flagd/protocolbuffers/go/flagd/sync/v1"
)

// encodedResponse is a SyncFlagsResponse encoded once for all the
// subscribers of a flag set: fan-out then costs no encoding per subscriber.
type encodedResponse []byte

func encodeResponse(content string) (encodedResponse, error) {
	return protobuf.Marshal(&syncv1.SyncFlagsResponse{FlagConfiguration: content})
}

// sharedCodec is gRPC's proto codec, except that it sends an
// encodedResponse as it is. The bytes are shared and never written to, so
// they are handed to gRPC as a buffer without a pool to return to.
type sharedCodec struct{ encoding.CodecV2 }

func newSharedCodec() sharedCodec { return sharedCodec{encoding.GetCodecV2(proto.Name)} }

func (c sharedCodec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(encodedResponse); ok {
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return c.CodecV2.Marshal(v)
}
