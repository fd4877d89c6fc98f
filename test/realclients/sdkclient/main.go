// Command sdkclient is a workload's view of flagplane's sync server: the
// OpenFeature Go SDK with flagd's provider in in-process mode, syncing one
// flag set over gRPC and evaluating a flag locally. The real-client suite
// runs it as a subprocess, because the provider's module graph (flagd's core,
// cloud SDKs) must stay out of the operator's go.mod.
//
// It authenticates like a pod would: a service-account token read from a
// file for every call (a projected token that the kubelet rotates), sent as
// "authorization: Bearer <token>".
//
// With -from-env it is instead an application configured by nothing but its
// environment, as one whose pod an InProcessConfiguration targets: the
// provider is flagd.NewProvider() without options, which reads the FLAGD_*
// variables (FLAGD_RESOLVER, FLAGD_HOST, FLAGD_PORT, FLAGD_TLS,
// FLAGD_SOURCE_SELECTOR, ...) and nothing else; -target, -selector and
// -token-file are not used. It first writes {"event":"environment",
// "flagd":{...}} with the FLAGD_* variables it saw.
//
// It writes JSON lines to stdout: {"event": ...} for provider events, and
// {"value": ..., "variant": ..., "reason": ..., "errorCode": ..., "metadata": ...}
// whenever the evaluation of -flag changes (metadata is the flag's). If the provider cannot start it writes
// {"event":"init-failed","message":...} and exits with status 3.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	flagd "github.com/open-feature/go-sdk-contrib/providers/flagd/pkg"
	"github.com/open-feature/go-sdk/openfeature"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func main() {
	var (
		target, selector, tokenFile, flagKey, flagType string
		interval, timeout                              time.Duration
		fromEnv                                        bool
	)
	flag.StringVar(&target, "target", "", "host:port of the sync server")
	flag.StringVar(&selector, "selector", "", "flag set selector, core.openfeature.dev/<namespace>/<name>")
	flag.StringVar(&tokenFile, "token-file", "", "file holding the bearer token, read for every call")
	flag.StringVar(&flagKey, "flag", "", "flag to evaluate")
	flag.StringVar(&flagType, "type", "boolean", "type of the flag: boolean, string, number or object")
	flag.DurationVar(&interval, "interval", 50*time.Millisecond, "evaluation interval")
	flag.DurationVar(&timeout, "init-timeout", 20*time.Second, "how long the provider may take to become ready")
	flag.BoolVar(&fromEnv, "from-env", false, "configure flagd's provider from the FLAGD_* environment only, as an app whose env an InProcessConfiguration injected")
	flag.Parse()
	newProvider := func() (*flagd.Provider, error) { return syncServerProvider(target, selector, tokenFile) }
	if fromEnv {
		newProvider = envProvider
	}
	if err := run(newProvider, flagKey, flagType, interval, timeout); err != nil {
		emit(map[string]any{"event": "init-failed", "message": err.Error()})
		os.Exit(3)
	}
}

var out sync.Mutex

func emit(v map[string]any) {
	b, _ := json.Marshal(v)
	out.Lock()
	defer out.Unlock()
	fmt.Println(string(b))
}

// tokenFileCredentials reads the token for every call, so that a rotated
// token is used as soon as it is on disk.
type tokenFileCredentials string

func (f tokenFileCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	b, err := os.ReadFile(string(f))
	if err != nil {
		return nil, err
	}
	return map[string]string{"authorization": "Bearer " + strings.TrimSpace(string(b))}, nil
}

// RequireTransportSecurity is false for the loopback tests; over a network
// the server runs with TLS.
func (tokenFileCredentials) RequireTransportSecurity() bool { return false }

// syncServerProvider syncs in process from flagplane's sync server, with
// the token of tokenFile.
func syncServerProvider(target, selector, tokenFile string) (*flagd.Provider, error) {
	return flagd.NewProvider(
		flagd.WithInProcessResolver(),
		flagd.WithTargetUri("dns:///"+target),
		flagd.WithSelector(selector),
		flagd.WithProviderID("flagplane-realclients"),
		// A refusal is final: retrying cannot grant access.
		flagd.WithFatalStatusCodes([]string{"PERMISSION_DENIED", "UNAUTHENTICATED", "INVALID_ARGUMENT"}),
		flagd.WithRetryBackoffMs(200),
		flagd.WithRetryBackoffMaxMs(1000),
		flagd.WithGrpcDialOptionsOverride([]grpc.DialOption{
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithPerRPCCredentials(tokenFileCredentials(tokenFile)),
		}),
	)
}

// envProvider is what an application does that leaves its flagd provider's
// configuration to the environment: no options at all.
func envProvider() (*flagd.Provider, error) {
	seen := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "FLAGD_") {
			seen[k] = v
		}
	}
	emit(map[string]any{"event": "environment", "flagd": seen})
	return flagd.NewProvider()
}

func run(newProvider func() (*flagd.Provider, error), flagKey, flagType string, interval, timeout time.Duration) error {
	provider, err := newProvider()
	if err != nil {
		return fmt.Errorf("creating the flagd provider: %w", err)
	}
	for _, t := range []openfeature.EventType{openfeature.ProviderReady, openfeature.ProviderConfigChange, openfeature.ProviderError, openfeature.ProviderStale} {
		cb := func(d openfeature.EventDetails) {
			emit(map[string]any{"event": string(t), "message": d.Message})
		}
		openfeature.AddHandler(t, &cb)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := openfeature.SetProviderWithContextAndWait(ctx, provider); err != nil {
		return fmt.Errorf("starting the provider: %w", err)
	}
	if ctx.Err() != nil {
		return errors.New("the provider did not become ready in time")
	}

	client := openfeature.NewDefaultClient()
	var last string
	for {
		value, d := evaluate(client, flagKey, flagType)
		line := map[string]any{"value": value, "variant": d.Variant, "reason": string(d.Reason), "errorCode": string(d.ErrorCode),
			"metadata": map[string]any(d.FlagMetadata)}
		b, _ := json.Marshal(line)
		if string(b) != last {
			last = string(b)
			emit(line)
		}
		time.Sleep(interval)
	}
}

// evaluate evaluates a flag with the typed method of its type, as an
// application would.
func evaluate(c *openfeature.Client, flagKey, flagType string) (any, openfeature.EvaluationDetails) {
	ctx, evalCtx := context.Background(), openfeature.EvaluationContext{}
	switch flagType {
	case "boolean":
		d, _ := c.BooleanValueDetails(ctx, flagKey, false, evalCtx)
		return d.Value, d.EvaluationDetails
	case "string":
		d, _ := c.StringValueDetails(ctx, flagKey, "", evalCtx)
		return d.Value, d.EvaluationDetails
	case "number":
		d, _ := c.FloatValueDetails(ctx, flagKey, 0, evalCtx)
		return d.Value, d.EvaluationDetails
	default:
		d, _ := c.ObjectValueDetails(ctx, flagKey, nil, evalCtx)
		return d.Value, d.EvaluationDetails
	}
}
