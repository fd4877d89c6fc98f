package outbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"buf.build/gen/go/open-feature/flagd/grpc/go/flagd/sync/v1/syncv1grpc"
	syncv1 "buf.build/gen/go/open-feature/flagd/protocolbuffers/go/flagd/sync/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// FetchFlags asks the flagd at address (host:port of its sync port) what
// its store holds — flagd.sync.v1.FlagSyncService/FetchAllFlags, which
// evaluates nothing and counts nothing in flagd's metrics — and returns
// its flag configuration: {"flags": {key: flag}}, each flag with the
// metadata flagd merged into it.
//
// The connection is the client's alone, closed after the answer: plain
// gRPC (a sidecar's sync port has no TLS), no proxy, a dial and a call
// bounded by ReadTimeout together, an answer by MaxBytes, no retry. Its
// errors are short, as Get's.
func (o *Client) FetchFlags(ctx context.Context, address string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, o.ReadTimeout)
	defer cancel()
	dialer := &net.Dialer{Timeout: o.ReadTimeout}
	conn, err := grpc.NewClient("passthrough:///"+address,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithNoProxy(),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", addr)
		}),
		grpc.WithDisableRetry(),
		grpc.WithMaxHeaderListSize(maxHeaderBytes),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(int(o.MaxBytes))),
	)
	if err != nil {
		return nil, errors.New("not an address the manager can read")
	}
	defer func() { _ = conn.Close() }()
	resp, err := syncv1grpc.NewFlagSyncServiceClient(conn).FetchAllFlags(ctx, &syncv1.FetchAllFlagsRequest{})
	if err != nil {
		return nil, o.shortGRPC(ctx, err)
	}
	return []byte(resp.GetFlagConfiguration()), nil
}

// maxHeaderBytes bounds the headers of an answer, as Get's.
const maxHeaderBytes = 64 << 10

// shortGRPC makes a gRPC error fit a status message.
func (o *Client) shortGRPC(ctx context.Context, err error) error {
	s, _ := status.FromError(err)
	switch {
	case ctx.Err() != nil || s.Code() == codes.DeadlineExceeded:
		return fmt.Errorf("no answer within %s", o.ReadTimeout)
	case s.Code() == codes.ResourceExhausted:
		return fmt.Errorf("%w (%d bytes)", ErrTooLarge, o.MaxBytes)
	case s.Code() == codes.Unimplemented:
		return errors.New("answered Unimplemented: not a flagd sync service")
	case s.Code() == codes.Unavailable:
		// "connection refused", without the dial's address and layers.
		msg := s.Message()
		if i := strings.LastIndex(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
		msg = strings.Trim(msg, `"`)
		return errors.New(msg)
	}
	return fmt.Errorf("answered %s", s.Code())
}
