package syncserver

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Identity is who a subscriber proved to be. Entitlement is decided by its
// Namespace alone: every workload of a namespace may read the same flag sets.
type Identity struct {
	// Namespace of the subscriber's workload.
	Namespace string
	// ServiceAccount of the subscriber's workload, when its credential names one.
	ServiceAccount string
	// Pod that the credential is bound to, when it is bound to one.
	Pod string
	// Expires is when the credential stops being valid; zero when it does
	// not expire. A stream opened with it ends then with Unauthenticated,
	// and the subscriber reconnects with its fresh credential (the kubelet
	// rotates projected service-account tokens well before they expire).
	Expires time.Time
}

// String is for logs.
func (id Identity) String() string {
	s := id.Namespace
	if id.ServiceAccount != "" {
		s += "/serviceaccount/" + id.ServiceAccount
	}
	if id.Pod != "" {
		s += "/pod/" + id.Pod
	}
	return s
}

// Authenticator turns the bearer token of a request into an Identity. Its
// errors are gRPC status errors: Unauthenticated for a credential that proves
// nothing, PermissionDenied for one that proves an identity that may not
// subscribe, Unavailable when the check itself could not be made.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (Identity, error)
}

// AuthorizationHeader is the gRPC metadata key of the credential:
// "authorization: Bearer <token>".
const AuthorizationHeader = "authorization"

// bearerToken reads the token of the authorization header.
func bearerToken(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	values := md.Get(AuthorizationHeader)
	if len(values) == 0 {
		return "", status.Error(codes.Unauthenticated, `no credential: send "authorization: Bearer <token>" metadata`)
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", status.Error(codes.Unauthenticated, `malformed credential: want "authorization: Bearer <token>"`)
	}
	return strings.TrimSpace(token), nil
}

// Chain tries authenticators in order and returns the first identity proven.
// Each one declines a token it does not recognise with Unauthenticated; the
// last error is returned when none accepts it.
type Chain []Authenticator

var _ Authenticator = Chain(nil)

// Authenticate implements Authenticator.
func (c Chain) Authenticate(ctx context.Context, token string) (Identity, error) {
	err := status.Error(codes.Unauthenticated, "no authenticator configured")
	for _, a := range c {
		var id Identity
		id, err = a.Authenticate(ctx, token)
		if status.Code(err) != codes.Unauthenticated {
			return id, err
		}
	}
	return Identity{}, err
}

type identityKey struct{}

func withIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity the server authenticated for a request.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}
