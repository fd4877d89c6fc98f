package flagdversion

// The facts below are read from flagd's repository (open-feature/flagd),
// at the tags of its daemon releases, flagd/vX.Y.Z. A release's image is
// built by flagd/build.Dockerfile at its tag, which puts the tag's own core/
// and flagd/ into one Go workspace (go work init ./core ./flagd): the image
// runs the core/ of the tag's tree, not the core version flagd/go.mod
// names. So every fact about core (the --sources fields, the providers,
// evaluation) is read from core/ at the flagd/ tag, and the release it
// names is the first flagd/ tag whose tree has it. (For v0.16.0 the two
// agree: flagd/v0.16.0 and core/v0.16.0 are one commit, and the flagd that
// flagplane's tests build from the Go module proxy resolves core v0.16.0.)
//
// Every fact is a span of releases: from the first release that has it to
// the first that no longer does. The spans were found by reading the named
// file at every flagd/ tag from v0.10.0 to v0.16.1, and confirmed at the
// releases on either side of each boundary.

// span is where a fact holds: from (included) to until (excluded). A zero
// from holds before the oldest recorded release; a zero until holds up to
// the newest.
type span struct{ from, until Version }

func (s span) holds(v Version) bool {
	return (s.from.IsZero() || v.AtLeast(s.from)) && (s.until.IsZero() || !v.AtLeast(s.until))
}

// always holds in every recorded release.
var always = span{}

func since(major, minor, patch int) span { return span{from: V(major, minor, patch)} }
func until(major, minor, patch int) span { return span{until: V(major, minor, patch)} }

// startFlag is a long flag of `flagd start` (or of the root command, which
// start inherits).
type startFlag struct {
	name string
	span
	// boolean flags take no value.
	boolean bool
	// env: flagd binds the flag with viper, whose prefix is FLAGD and which
	// reads FLAGD_<NAME> (dashes as underscores) from the environment
	// (viper.AutomaticEnv in flagd/cmd/root.go, at every recorded release).
	env bool
}

// startFlags: flagd/cmd/start.go (flags and their viper.BindPFlag) and
// flagd/cmd/root.go (persistent flags) at each flagd/ tag.
var startFlags = []startFlag{
	// root.go, every recorded release: --debug (bound: FLAGD_DEBUG) and --config.
	{name: "debug", span: always, boolean: true, env: true},
	{name: "config", span: always},
	// start.go at flagd/v0.10.0 and every later tag, all bound.
	{name: "cors-origin", span: always, env: true},
	{name: "log-format", span: always, env: true},
	{name: "management-port", span: always, env: true},
	{name: "metrics-exporter", span: always, env: true},
	{name: "ofrep-port", span: always, env: true},
	{name: "otel-collector-uri", span: always, env: true},
	{name: "port", span: always, env: true},
	{name: "server-cert-path", span: always, env: true},
	{name: "server-key-path", span: always, env: true},
	{name: "socket-path", span: always, env: true},
	{name: "sources", span: always, env: true},
	{name: "sync-port", span: always, env: true},
	{name: "uri", span: always, env: true},
	// start.go: the OpenTelemetry TLS flags first appear at flagd/v0.11.3;
	// otel-reload-interval is never bound (no env var).
	{name: "otel-ca-path", span: since(0, 11, 3), env: true},
	{name: "otel-cert-path", span: since(0, 11, 3), env: true},
	{name: "otel-key-path", span: since(0, 11, 3), env: true},
	{name: "otel-reload-interval", span: since(0, 11, 3)},
	// start.go: --context-value first appears at flagd/v0.11.5 (absent at v0.11.4).
	{name: "context-value", span: since(0, 11, 5), env: true},
	// start.go: --sync-socket-path first appears at flagd/v0.12.3.
	{name: "sync-socket-path", span: since(0, 12, 3), env: true},
	// start.go: --context-from-header and --stream-deadline first appear at
	// flagd/v0.12.5 (absent at v0.12.4).
	{name: "context-from-header", span: since(0, 12, 5), env: true},
	{name: "stream-deadline", span: since(0, 12, 5), env: true},
	// start.go: --disable-sync-metadata first appears at flagd/v0.12.9.
	{name: "disable-sync-metadata", span: since(0, 12, 9), boolean: true, env: true},
	// start.go: the request size limits first appear at flagd/v0.14.2.
	{name: "max-request-body", span: since(0, 14, 2), env: true},
	{name: "max-request-header", span: since(0, 14, 2), env: true},
	// start.go: the gRPC keep-alive flags first appear at flagd/v0.16.1.
	{name: "keep-alive-min-time", span: since(0, 16, 1), env: true},
	{name: "keep-alive-permit-without-stream", span: since(0, 16, 1), boolean: true, env: true},
	// start.go: removed by commit 49f6fe56 ("remove deprecated flags"),
	// first released in flagd/v0.8.0, so absent from every recorded
	// release. The OpenFeature Operator still passes syncProviderArgs as
	// --sync-provider-args.
	{name: "sync-provider-args", span: until(0, 8, 0), env: true},
	{name: "sync-provider", span: until(0, 8, 0), env: true},
	{name: "bearer-token", span: until(0, 8, 0), env: true},
	{name: "evaluator", span: until(0, 8, 0), env: true},
	{name: "metrics-port", span: until(0, 8, 0), env: true},
}

// sourceField is a field of an entry of --sources.
type sourceField struct {
	name string
	span
}

// sourceFields: the JSON names of SourceConfig in core/pkg/sync/isync.go at
// each flagd/ tag. flagd parses --sources with encoding/json
// (core/pkg/sync/builder/utils.go, ParseSources): an unknown field is
// dropped without a word, so writing one is never an error, only useless.
// uri and provider are required.
var sourceFields = []sourceField{
	// isync.go at flagd/v0.10.0 and every later tag.
	{"uri", always},
	{"provider", always},
	{"authHeader", always},
	{"certPath", always},
	{"tls", always},
	{"providerID", always},
	{"selector", always},
	{"interval", always},
	// isync.go: bearerToken is gone at flagd/v0.13.0 (commit efda06aa,
	// "remove deprecated bearerToken option"); authHeader replaces it. The
	// OpenFeature Operator still writes bearerToken.
	{"bearerToken", until(0, 13, 0)},
	// isync.go: maxMsgSize first appears at flagd/v0.11.2.
	{"maxMsgSize", since(0, 11, 2)},
	// isync.go: oauth and timeoutS first appear at flagd/v0.13.0.
	{"oauth", since(0, 13, 0)},
	{"timeoutS", since(0, 13, 0)},
	// isync.go: incrementalUpdates first appears at flagd/v0.15.2.
	{"incrementalUpdates", since(0, 15, 2)},
	// isync.go: intervalSeed first appears at flagd/v0.15.4.
	{"intervalSeed", since(0, 15, 4)},
	// isync.go: headers first appears at flagd/v0.15.6 (commit 65d37965,
	// "custom headers support for sync providers"); the grpc sync sends
	// them as gRPC metadata from then on (core/pkg/sync/builder/syncbuilder.go,
	// newGRPC). Before, a grpc source sends no header of its own at all:
	// its newGRPC passes no AuthHeader either.
	{"headers", since(0, 15, 6)},
}

// providers: the provider names syncFromConfig switches on in
// core/pkg/sync/builder/syncbuilder.go at each flagd/ tag (any other name
// makes flagd exit).
var providers = []sourceField{
	// syncbuilder.go at flagd/v0.10.0 and every later tag.
	{"file", always},
	{"grpc", always},
	{"http", always},
	{"kubernetes", always},
	// syncbuilder.go: fsnotify, fileinfo and gcs first appear at flagd/v0.11.2.
	{"fsnotify", since(0, 11, 2)},
	{"fileinfo", since(0, 11, 2)},
	{"gcs", since(0, 11, 2)},
	// syncbuilder.go: azblob first appears at flagd/v0.11.4.
	{"azblob", since(0, 11, 4)},
	// syncbuilder.go: s3 first appears at flagd/v0.11.5.
	{"s3", since(0, 11, 5)},
}

// releases are the flagd daemon releases whose facts are recorded: every
// flagd/ tag of flagd's repository from v0.10.0 (2024-04) to v0.16.1
// (2026-07). flagplane vouches for these: it renders what it writes for
// each from the facts above, and its tests check that everything it can
// write is accepted by each.
var releases = []Version{
	V(0, 10, 0), V(0, 10, 1), V(0, 10, 2), V(0, 10, 3),
	V(0, 11, 0), V(0, 11, 1), V(0, 11, 2), V(0, 11, 3), V(0, 11, 4), V(0, 11, 5), V(0, 11, 6), V(0, 11, 7), V(0, 11, 8),
	V(0, 12, 0), V(0, 12, 1), V(0, 12, 2), V(0, 12, 3), V(0, 12, 4), V(0, 12, 5), V(0, 12, 6), V(0, 12, 7), V(0, 12, 8), V(0, 12, 9),
	V(0, 13, 0), V(0, 13, 1), V(0, 13, 2), V(0, 13, 3),
	V(0, 14, 0), V(0, 14, 1), V(0, 14, 2), V(0, 14, 3), V(0, 14, 4), V(0, 14, 5),
	V(0, 15, 0), V(0, 15, 1), V(0, 15, 2), V(0, 15, 3), V(0, 15, 4), V(0, 15, 5), V(0, 15, 6), V(0, 15, 7),
	V(0, 16, 0), V(0, 16, 1),
}
