package webhooks

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/status"
)

var (
	grpcResolverSchemes  = regexp.MustCompile(`^(envoy|dns|uds|xds)://`)
	blobURIs             = map[v1beta1.SyncProviderType]string{v1beta1.SyncProviderGCS: "gs", v1beta1.SyncProviderAzureBlob: "azblob", v1beta1.SyncProviderS3: "s3"}
	knownLogFormats      = []string{"json", "console"}
	knownEvaluators      = []string{"json"}
	intervalProviders    = []v1beta1.SyncProviderType{v1beta1.SyncProviderHTTP, v1beta1.SyncProviderGCS, v1beta1.SyncProviderAzureBlob, v1beta1.SyncProviderS3}
	sourceEntryFieldDocs = "name or namespace/name"
)

// ValidateSourceSpec checks a FeatureFlagSource beyond its CRD schema: the
// syntax of every entry for its provider (a FeatureFlag reference, or a
// URI flagd can sync from), the sidecar's ports, env var names, arguments,
// resources and the securityContext annotation, the names of its targets
// (which are always in its own namespace), and the lengths of what it
// makes of the sidecar's arguments and environment (sourceLengths). Settings that do not
// apply to an entry's provider are warnings, not errors, so that manifests
// written for the OpenFeature Operator keep applying. defaultProvider is
// the operator's (the manager's --sidecar-sync-provider).
func ValidateSourceSpec(src *v1beta1.FeatureFlagSource, defaultProvider v1beta1.SyncProviderType) (field.ErrorList, []string) {
	errs := status.ValidateSource(src, defaultProvider)
	var warnings []string
	specPath := field.NewPath("spec")
	for _, check := range sourceChecks {
		checkErrs, checkWarnings := check(specPath, src, defaultProvider)
		errs, warnings = append(errs, checkErrs...), append(warnings, checkWarnings...)
	}
	return errs, warnings
}

// sourceCheck is one rule about a FeatureFlagSource, under specPath (its
// spec). It returns the errors and warnings it finds.
type sourceCheck func(specPath *field.Path, src *v1beta1.FeatureFlagSource, defaultProvider v1beta1.SyncProviderType) (field.ErrorList, []string)

// sourceChecks run in order after status.ValidateSource, and every one
// runs: ValidateSourceSpec reports all they find, in their order.
var sourceChecks = []sourceCheck{
	checkSourceEntries,
	checkSourcePorts,
	checkSourceEnvVars,
	checkSourceSyncProviderArgs,
	checkSourceContextValues,
	checkSourceHeaderToContextMappings,
	checkSourceCORS,
	checkSourceSidecarSettings,
	checkSourceResources,
	checkSourceTargetRefs,
	sourceLengths,
	checkSourceSecurityContext,
}

// checkSourceEntries checks every entry for its provider (validateEntry),
// and warns of the settings its provider ignores and of a repeated entry.
func checkSourceEntries(specPath *field.Path, src *v1beta1.FeatureFlagSource, defaultProvider v1beta1.SyncProviderType) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
	spec := &src.Spec
	seen := map[string]int{}
	for i, e := range spec.Sources {
		p := specPath.Child("sources").Index(i)
		provider := topology.ProviderInForce(e, spec.DefaultSyncProvider, defaultProvider)
		errs = append(errs, validateEntry(p, provider, e)...)
		warnings = append(warnings, entryWarnings(p, provider, e)...)
		id := string(provider) + " " + e.Source
		if j, dup := seen[id]; dup {
			warnings = append(warnings, fmt.Sprintf("%s: the same source as spec.sources[%d]", p, j))
		} else {
			seen[id] = i
		}
	}
	return errs, warnings
}

// checkSourcePorts: flagd's ports in the sidecar (the API's defaults where
// unset) differ from each other and from its sync service's.
func checkSourcePorts(specPath *field.Path, src *v1beta1.FeatureFlagSource, _ v1beta1.SyncProviderType) (field.ErrorList, []string) {
	var errs field.ErrorList
	spec := &src.Spec
	ports := map[int32]string{}
	for _, pp := range []struct {
		name string
		v    int32
		def  int32
	}{{"port", spec.Port, 8013}, {"managementPort", spec.ManagementPort, 8014}, {"ofrepPort", spec.OFREPPort, 8016}} {
		v := pp.v
		if v == 0 {
			v = pp.def
		}
		switch {
		case v == topology.FlagdSyncPort:
			errs = append(errs, field.Invalid(specPath.Child(pp.name), v, fmt.Sprintf("flagd serves its sync service on %d in the sidecar", topology.FlagdSyncPort)))
		case ports[v] != "":
			errs = append(errs, field.Invalid(specPath.Child(pp.name), v, "the same port as "+ports[v]))
		default:
			ports[v] = "spec." + pp.name
		}
	}
	return errs, nil
}

// checkSourceEnvVars: the env var prefix, and every env var's name with it.
func checkSourceEnvVars(specPath *field.Path, src *v1beta1.FeatureFlagSource, _ v1beta1.SyncProviderType) (field.ErrorList, []string) {
	var errs field.ErrorList
	spec := &src.Spec
	prefix := spec.EnvVarPrefix
	if prefix == "" {
		prefix = "FLAGD"
	}
	if !topology.EnvVarPrefixPattern.MatchString(prefix) {
		errs = append(errs, field.Invalid(specPath.Child("envVarPrefix"), spec.EnvVarPrefix,
			"must be letters, digits and underscores, not starting with a digit"))
	}
	for i, e := range spec.EnvVars {
		for _, msg := range validation.IsEnvVarName(prefix + "_" + e.Name) {
			errs = append(errs, field.Invalid(specPath.Child("envVars").Index(i).Child("name"), e.Name, msg))
		}
	}
	return errs, nil
}

// checkSourceSyncProviderArgs: every sync provider arg is key=value.
func checkSourceSyncProviderArgs(specPath *field.Path, src *v1beta1.FeatureFlagSource, _ v1beta1.SyncProviderType) (field.ErrorList, []string) {
	var errs field.ErrorList
	for i, a := range src.Spec.SyncProviderArgs {
		if k, _, ok := strings.Cut(a, "="); !ok || k == "" {
			errs = append(errs, field.Invalid(specPath.Child("syncProviderArgs").Index(i), a, "must be key=value"))
		}
	}
	return errs, nil
}

// checkSourceContextValues: no context key is empty.
func checkSourceContextValues(specPath *field.Path, src *v1beta1.FeatureFlagSource, _ v1beta1.SyncProviderType) (field.ErrorList, []string) {
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(src.Spec.ContextValues)) {
		if k == "" {
			errs = append(errs, field.Invalid(specPath.Child("contextValues").Key(k), k, "a context key must not be empty"))
		}
	}
	return errs, nil
}

// checkSourceHeaderToContextMappings: every header is an HTTP header name,
// mapped to a context key that is not empty.
func checkSourceHeaderToContextMappings(specPath *field.Path, src *v1beta1.FeatureFlagSource, _ v1beta1.SyncProviderType) (field.ErrorList, []string) {
	var errs field.ErrorList
	mappings := src.Spec.HeaderToContextMappings
	for _, h := range slices.Sorted(maps.Keys(mappings)) {
		p := specPath.Child("headerToContextMappings").Key(h)
		for _, msg := range validation.IsHTTPHeaderName(h) {
			errs = append(errs, field.Invalid(p, h, msg))
		}
		if mappings[h] == "" {
			errs = append(errs, field.Invalid(p, "", "the context key must not be empty"))
		}
	}
	return errs, nil
}

// checkSourceCORS: no CORS origin is blank.
func checkSourceCORS(specPath *field.Path, src *v1beta1.FeatureFlagSource, _ v1beta1.SyncProviderType) (field.ErrorList, []string) {
	var errs field.ErrorList
	for i, o := range src.Spec.CORS {
		if strings.TrimSpace(o) == "" {
			errs = append(errs, field.Invalid(specPath.Child("cors").Index(i), o, "an origin must not be empty"))
		}
	}
	return errs, nil
}

// checkSourceSidecarSettings: the log format, evaluator, socket path and
// OpenTelemetry collector of the sidecar, where set, are ones flagd takes.
func checkSourceSidecarSettings(specPath *field.Path, src *v1beta1.FeatureFlagSource, _ v1beta1.SyncProviderType) (field.ErrorList, []string) {
	var errs field.ErrorList
	spec := &src.Spec
	if spec.LogFormat != "" && !slices.Contains(knownLogFormats, spec.LogFormat) {
		errs = append(errs, field.NotSupported(specPath.Child("logFormat"), spec.LogFormat, knownLogFormats))
	}
	if spec.Evaluator != "" && !slices.Contains(knownEvaluators, spec.Evaluator) {
		errs = append(errs, field.NotSupported(specPath.Child("evaluator"), spec.Evaluator, knownEvaluators))
	}
	if spec.SocketPath != "" && !path.IsAbs(spec.SocketPath) {
		errs = append(errs, field.Invalid(specPath.Child("socketPath"), spec.SocketPath, "must be an absolute path"))
	}
	if u := spec.OtelCollectorUri; u != "" && (strings.ContainsAny(u, " \t\n") || strings.HasPrefix(u, ":")) {
		errs = append(errs, field.Invalid(specPath.Child("otelCollectorUri"), u, "must be host:port or a URL of the collector"))
	}
	return errs, nil
}

// checkSourceResources: no request exceeds its limit.
func checkSourceResources(specPath *field.Path, src *v1beta1.FeatureFlagSource, _ v1beta1.SyncProviderType) (field.ErrorList, []string) {
	var errs field.ErrorList
	resources := src.Spec.Resources
	for name, req := range resources.Requests {
		if lim, ok := resources.Limits[name]; ok && req.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(specPath.Child("resources", "requests").Key(string(name)), req.String(),
				"must not exceed the limit "+lim.String()))
		}
	}
	return errs, nil
}

// checkSourceTargetRefs: every target is named by a name of the source's
// own namespace.
func checkSourceTargetRefs(specPath *field.Path, src *v1beta1.FeatureFlagSource, _ v1beta1.SyncProviderType) (field.ErrorList, []string) {
	var errs field.ErrorList
	for i, r := range src.Spec.TargetRefs {
		p := specPath.Child("targetRefs").Index(i).Child("name")
		if strings.Contains(r.Name, "/") {
			errs = append(errs, field.Invalid(p, r.Name, "a source targets workloads of its own namespace: a name, without a namespace"))
			continue
		}
		for _, msg := range validation.IsDNS1123Subdomain(r.Name) {
			errs = append(errs, field.Invalid(p, r.Name, msg))
		}
	}
	return errs, nil
}

// checkSourceSecurityContext: the sidecar securityContext annotation, where
// the source carries it, is one the injection reads.
func checkSourceSecurityContext(_ *field.Path, src *v1beta1.FeatureFlagSource, _ v1beta1.SyncProviderType) (field.ErrorList, []string) {
	sc, ok := src.Annotations[injection.AnnotationSidecarSecurityContext]
	if !ok {
		return nil, nil
	}
	if _, err := injection.ParseSecurityContextOverride(sc); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations").Key(injection.AnnotationSidecarSecurityContext), sc, err.Error())}, nil
	}
	return nil, nil
}

// validateEntry checks the source of one entry for its provider.
func validateEntry(p *field.Path, provider v1beta1.SyncProviderType, e v1beta1.Source) field.ErrorList {
	var errs field.ErrorList
	src := p.Child("source")
	switch {
	case provider.ReferencesFlagSet():
		// Without a default namespace, a bare name has none.
		namespace, name, ok := topology.ParseRef(e.Source, "")
		if !ok {
			break // status.ValidateSource reports the syntax
		}
		if namespace != "" {
			for _, msg := range validation.IsDNS1123Label(namespace) {
				errs = append(errs, field.Invalid(src, e.Source, fmt.Sprintf("provider %s takes a FeatureFlag as %s: namespace %s", provider, sourceEntryFieldDocs, msg)))
			}
		}
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			errs = append(errs, field.Invalid(src, e.Source, fmt.Sprintf("provider %s takes a FeatureFlag as %s: name %s", provider, sourceEntryFieldDocs, msg)))
		}
	case provider == v1beta1.SyncProviderHTTP:
		u, err := url.Parse(e.Source)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, field.Invalid(src, e.Source, "provider http takes an http:// or https:// URL"))
		}
	case provider == v1beta1.SyncProviderGRPC:
		target := e.Source
		for _, prefix := range []string{"grpc://", "grpcs://"} {
			target = strings.TrimPrefix(target, prefix)
		}
		if grpcResolverSchemes.MatchString(e.Source) {
			break
		}
		if host, port, err := net.SplitHostPort(target); err != nil || host == "" || !validPort(port) {
			errs = append(errs, field.Invalid(src, e.Source, "provider grpc takes host:port, grpc://host:port, grpcs://host:port or a dns://, envoy://, uds:// or xds:// target"))
		}
	default:
		if scheme, ok := blobURIs[provider]; ok {
			rest, has := strings.CutPrefix(e.Source, scheme+"://")
			bucket, object, _ := strings.Cut(rest, "/")
			if !has || bucket == "" || object == "" {
				errs = append(errs, field.Invalid(src, e.Source, fmt.Sprintf("provider %s takes %s://<bucket>/<object>", provider, scheme)))
			}
		}
	}
	return errs
}

// entryWarnings names the settings of an entry that its provider ignores.
func entryWarnings(p *field.Path, provider v1beta1.SyncProviderType, e v1beta1.Source) []string {
	var out []string
	ignored := func(name string) {
		out = append(out, fmt.Sprintf("%s.%s is ignored by provider %s", p, name, provider))
	}
	if e.HttpSyncBearerToken != "" && provider != v1beta1.SyncProviderHTTP {
		ignored("httpSyncBearerToken")
	}
	if provider != v1beta1.SyncProviderGRPC {
		if e.TLS {
			ignored("tls")
		}
		if e.CertPath != "" {
			ignored("certPath")
		}
		if e.ProviderID != "" {
			ignored("providerID")
		}
		if e.Selector != "" {
			ignored("selector")
		}
	}
	if e.Interval != 0 && !slices.Contains(intervalProviders, provider) {
		ignored("interval")
	}
	return out
}

func validPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n > 0 && n < 65536
}

// proxyEntryExtra is what the operator adds to a flagd-proxy entry of
// --sources beyond what the source says, which the source's webhook does
// not know: the sync server's address and the namespace's credential
// (about 40 and 150 bytes, with their JSON).
const proxyEntryExtra = 256

// sourceLengths finds what the source alone makes of the flagd sidecar
// that Linux's execve would refuse, so that it is refused here rather
// than admitted to leave its workloads without flagd (injection's
// limits.go): an argument or environment string longer than
// injection.MaxArgBytes. flagd's --sources argument is measured as a
// workload of the source's namespace gets it (without the operator's sync
// server and credential, which flagd-proxy entries add: a lower bound for
// them; over the limit with their usual size is a warning). More file
// entries than inotify's default allows flagd is a warning: nodes may
// allow more. Several sources on one workload may pass the limits
// together, which only the workload's pods show: see the Pod webhook.
func sourceLengths(specPath *field.Path, src *v1beta1.FeatureFlagSource, defaultProvider v1beta1.SyncProviderType) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
	spec := &src.Spec
	entries := make([]injection.FlagdSourceConfig, 0, len(spec.Sources))
	seen := make(map[string]bool, len(spec.Sources))
	files, proxies := 0, 0
	for _, e := range spec.Sources {
		provider := topology.ProviderInForce(e, spec.DefaultSyncProvider, defaultProvider)
		cfg, ok := injection.EntryOfSource(src.Namespace, e, provider, injection.Options{})
		if id := string(provider) + " " + e.Source; !ok || seen[id] {
			continue // a reference that names nothing is refused above; a repeat is one entry
		} else {
			seen[id] = true
		}
		entries = append(entries, cfg)
		switch provider {
		case v1beta1.SyncProviderFile:
			files++
		case v1beta1.SyncProviderFlagdProxy:
			proxies++
		}
	}
	if n := injection.SourcesArgBytes(entries); n > injection.MaxArgBytes {
		errs = append(errs, field.Invalid(specPath.Child("sources"), fmt.Sprintf("%d entries", len(spec.Sources)),
			fmt.Sprintf("flagd's --sources argument for these entries alone would be %d bytes, over the %d bytes Linux takes in one argument (MAX_ARG_STRLEN): "+
				"flagd could not start; name fewer flag sets (merge FeatureFlags), or give them shorter names", n, injection.MaxArgBytes)))
	} else if extra := n + proxies*proxyEntryExtra; extra > injection.MaxArgBytes {
		warnings = append(warnings, fmt.Sprintf("spec.sources: flagd's --sources argument would be about %d bytes with the sync server's address and credential in its %d flagd-proxy entries, "+
			"over the %d bytes Linux takes in one argument: its sidecars would probably be refused", extra, proxies, injection.MaxArgBytes))
	}
	if files > injection.InotifyInstances {
		warnings = append(warnings, fmt.Sprintf("spec.sources: %d file entries: flagd holds an inotify instance for each, and Linux allows %d per user by default "+
			"(fs.inotify.max_user_instances), shared by every flagd sidecar of a node: flagd will fail to start unless the nodes allow more; "+
			"the kubernetes and flagd-proxy providers need none", files, injection.InotifyInstances))
	}
	tooLong := func(p *field.Path, shown string, n int, what string) {
		errs = append(errs, field.Invalid(p, shown, fmt.Sprintf("%s would be %d bytes, over the %d bytes Linux takes in one argument or environment string (MAX_ARG_STRLEN): "+
			"flagd could not start", what, n, injection.MaxArgBytes)))
	}
	short := func(v string) string {
		if len(v) > 64 {
			return v[:64] + "..."
		}
		return v
	}
	type arg struct {
		p     *field.Path
		value string
		what  string
	}
	args := []arg{
		{specPath.Child("otelCollectorUri"), spec.OtelCollectorUri, "flagd's --otel-collector-uri argument"},
		{specPath.Child("socketPath"), spec.SocketPath, "flagd's --socket-path argument"},
	}
	for _, k := range slices.Sorted(maps.Keys(spec.ContextValues)) {
		args = append(args, arg{specPath.Child("contextValues").Key(short(k)), k + "=" + spec.ContextValues[k], "flagd's --context-value argument"})
	}
	for _, h := range slices.Sorted(maps.Keys(spec.HeaderToContextMappings)) {
		args = append(args, arg{specPath.Child("headerToContextMappings").Key(short(h)), h + "=" + spec.HeaderToContextMappings[h], "flagd's --context-from-header argument"})
	}
	for i, o := range spec.CORS {
		args = append(args, arg{specPath.Child("cors").Index(i), o, "flagd's --cors-origin argument"})
	}
	for i, a := range spec.SyncProviderArgs {
		args = append(args, arg{specPath.Child("syncProviderArgs").Index(i), a, "flagd's --sync-provider-args argument"})
	}
	for _, a := range args {
		if len(a.value) > injection.MaxArgBytes {
			tooLong(a.p, short(a.value), len(a.value), a.what)
		}
	}
	prefix := spec.EnvVarPrefix
	if prefix == "" {
		prefix = injection.DefaultEnvVarPrefix
	}
	for i, e := range spec.EnvVars {
		e.Name = injection.SourceEnvVarKey(prefix, e.Name)
		if n := injection.EnvStringBytes(e); n > injection.MaxArgBytes {
			tooLong(specPath.Child("envVars").Index(i).Child("value"), short(e.Value), n, "env var "+e.Name+" (of flagd and of the app containers)")
		}
	}
	return errs, warnings
}
