package app

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// The OpenFeature Operator's operator-level settings, as flags. Each maps
// one Helm value of its chart (docs/openfeature-operator.md, "Helm values
// as flags", has the table); the resource flags and --image-pull-secrets,
// --labels and --annotations keep the OpenFeature Operator's own flag names
// and formats.

// bindOFOFlags ties the sidecar's and in-process configurations' defaults,
// and what goes on generated objects, to flags.
func (o *Options) bindOFOFlags(fs *flag.FlagSet) {
	s := &o.Sidecar
	fs.Var((*int32Flag)(&s.Port), "sidecar-port", "port flagd serves evaluations on, where no source sets one (sidecarConfiguration.port)")
	fs.Var((*int32Flag)(&s.ManagementPort), "sidecar-management-port", "flagd's management port (probes, metrics), where no source sets one (sidecarConfiguration.managementPort)")
	fs.StringVar(&s.SocketPath, "sidecar-socket-path", s.SocketPath, "unix socket flagd serves on, where no source sets one (sidecarConfiguration.socketPath)")
	fs.StringVar(&s.Evaluator, "sidecar-evaluator", s.Evaluator, "<prefix>_EVALUATOR of the sidecar and the apps, where no source sets it (sidecarConfiguration.evaluator)")
	fs.StringVar(&s.LogFormat, "sidecar-log-format", s.LogFormat, "flagd's log format, json or console, where no source sets it (sidecarConfiguration.logFormat)")
	fs.StringVar(&s.EnvVarPrefix, "sidecar-env-var-prefix", s.EnvVarPrefix, "prefix of the env vars injected for the sidecar, where no source sets one; empty names them without a prefix (sidecarConfiguration.envVarPrefix)")
	fs.BoolVar(&s.ProbesEnabled, "sidecar-probes-enabled", s.ProbesEnabled, "give the sidecar its probes, where no source says (sidecarConfiguration.probesEnabled)")
	fs.BoolVar(&s.DebugLogging, "sidecar-debug-logging", s.DebugLogging, "run the sidecar with --debug, where no source says (sidecarConfiguration.debugLogging)")
	fs.StringVar(&s.OtelCollectorURI, "sidecar-otel-collector-uri", s.OtelCollectorURI, "OpenTelemetry collector of the sidecar, where no source sets one (sidecarConfiguration.otelCollectorUri)")
	fs.Var((*commaList)(&s.ProviderArgs), "sidecar-provider-args",
		"comma-separated key=value sync provider args, before the sources' own (sidecarConfiguration.providerArgs); they reach flagd only with --sidecar-sync-provider-args, which flagd v0.16 does not know")
	fs.Var(syncProviderFlag{&o.DefaultSyncProvider}, "sidecar-sync-provider",
		"provider of a source entry that names none, where its source has no defaultSyncProvider (sidecarConfiguration.defaultSyncProvider): file, kubernetes, flagd-proxy, http, grpc, gcs, azblob or s3")
	fs.Var((*commaList)(&s.ImagePullSecrets), "image-pull-secrets", "comma-separated Secrets (of the pod's namespace) added to the imagePullSecrets of every pod the sidecar is injected into (imagePullSecrets)")

	p := &o.InProcess
	fs.Var((*int32Flag)(&p.Port), "in-process-port", "<prefix>_PORT of in-process pods, where no configuration sets it (inProcessConfiguration.port)")
	fs.StringVar(&p.Host, "in-process-host", p.Host, "<prefix>_HOST of in-process pods (inProcessConfiguration.host)")
	fs.StringVar(&p.SocketPath, "in-process-socket-path", p.SocketPath, "<prefix>_SOCKET_PATH of in-process pods (inProcessConfiguration.socketPath)")
	fs.BoolVar(&p.TLS, "in-process-tls", p.TLS, "<prefix>_TLS of in-process pods (inProcessConfiguration.tls)")
	fs.StringVar(&p.OfflineFlagSourcePath, "in-process-offline-flag-source-path", p.OfflineFlagSourcePath, "<prefix>_OFFLINE_FLAG_SOURCE_PATH of in-process pods (inProcessConfiguration.offlineFlagSourcePath)")
	fs.StringVar(&p.Selector, "in-process-selector", p.Selector, "<prefix>_SOURCE_SELECTOR of in-process pods (inProcessConfiguration.selector)")
	fs.StringVar(&p.Cache, "in-process-cache", p.Cache, "<prefix>_CACHE of in-process pods, lru or disabled (inProcessConfiguration.cache.type)")
	fs.IntVar(&p.CacheMaxSize, "in-process-cache-max-size", p.CacheMaxSize, "<prefix>_MAX_CACHE_SIZE of in-process pods (inProcessConfiguration.cache.size)")
	fs.StringVar(&p.EnvVarPrefix, "in-process-env-var-prefix", p.EnvVarPrefix, "prefix of the env vars injected for in-process configurations; empty names them without a prefix (inProcessConfiguration.envVarPrefix)")

	fs.Var(keyValueFlag{&o.Generated.Labels}, "labels", "labels put on every object flagplane generates (ConfigMaps, Roles, RoleBindings), as key1:value1,key2:value2 (labels)")
	fs.Var(managedByFlag{&o.Generated.ManagedBy}, "managed-by", "value of app.kubernetes.io/managed-by on every object flagplane generates, by which it knows them; objects labelled flagplane stay its own. "+
		"open-feature-operator keeps selectors written for the OpenFeature Operator working, and takes over its Flagds' objects in place (managedBy)")
	fs.Var(keyValueFlag{&o.Generated.Annotations}, "annotations", "annotations put on every object flagplane generates, as key1:value1,key2:value2 (annotations)")
	fs.BoolVar(&o.StrictValidation, "strict-validation", o.StrictValidation,
		"refuse FeatureFlags with warnings (a $ref to a missing evaluator, a variant nothing returns, ...) as errors, and do not serve them")
}

// validateOFO reports settings of bindOFOFlags that cannot work.
func (o Options) validateOFO() []error {
	var errs []error
	if err := o.InProcess.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("in-process flags: %w", err))
	}
	if err := o.Generated.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(o.Sidecar.ProviderArgs) > 0 && !o.Admission.Injection.PassSyncProviderArgs {
		errs = append(errs, errors.New("--sidecar-provider-args needs --sidecar-sync-provider-args: flagd v0.16 has no --sync-provider-args, and the sidecar would exit on it"))
	}
	return errs
}

// managedByFlag is --managed-by: a label value, not empty.
type managedByFlag struct{ v *string }

func (f managedByFlag) String() string {
	if f.v == nil || *f.v == "" {
		return v1beta1.ManagedByValue
	}
	return *f.v
}

func (f managedByFlag) Set(v string) error {
	if v == "" {
		return errors.New("empty: flagplane knows the objects it generates by this value")
	}
	*f.v = v
	return nil
}

// int32Flag is an int32 flag.
type int32Flag int32

func (f *int32Flag) String() string { return strconv.Itoa(int(*f)) }

func (f *int32Flag) Set(v string) error {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return err
	}
	*f = int32Flag(n)
	return nil
}

// commaList is a comma-separated list, as the OpenFeature Operator's flags
// and Helm values take them; setting it replaces it, blanks are dropped.
type commaList []string

func (l *commaList) String() string { return strings.Join(*l, ",") }

func (l *commaList) Set(v string) error {
	*l = nil
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// keyValueFlag is the OpenFeature Operator's map format: key1:value1,key2:value2.
type keyValueFlag struct{ m *map[string]string }

func (f keyValueFlag) String() string {
	if f.m == nil || len(*f.m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(*f.m))
	for k := range *f.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + ":" + (*f.m)[k]
	}
	return strings.Join(pairs, ",")
}

func (f keyValueFlag) Set(v string) error {
	m := map[string]string{}
	for pair := range strings.SplitSeq(v, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, val, ok := strings.Cut(pair, ":")
		if !ok {
			return fmt.Errorf("%q is not key:value", pair)
		}
		m[strings.TrimSpace(k)] = strings.TrimSpace(val)
	}
	*f.m = m
	return nil
}

// syncProviderFlag is a sync provider name.
type syncProviderFlag struct{ p *v1beta1.SyncProviderType }

func (f syncProviderFlag) String() string {
	if f.p == nil {
		return ""
	}
	return string(*f.p)
}

func (f syncProviderFlag) Set(v string) error {
	p := v1beta1.SyncProviderType(v)
	if !slices.Contains(knownProviders, p) {
		return fmt.Errorf("unknown sync provider %q", v)
	}
	*f.p = p
	return nil
}

var knownProviders = []v1beta1.SyncProviderType{
	v1beta1.SyncProviderFile, v1beta1.SyncProviderKubernetes, v1beta1.SyncProviderFlagdProxy, v1beta1.SyncProviderHTTP,
	v1beta1.SyncProviderGRPC, v1beta1.SyncProviderGCS, v1beta1.SyncProviderAzureBlob, v1beta1.SyncProviderS3,
}
