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

// flagdSyncPort is the port flagd serves its own sync service on in the
// sidecar; flagplane leaves it at flagd's default.
const flagdSyncPort = 8015

var (
	envPrefixPattern     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
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
// resources and the securityContext annotation, and the names of its
// targets (which are always in its own namespace). Settings that do not
// apply to an entry's provider are warnings, not errors, so that manifests
// written for the OpenFeature Operator keep applying. defaultProvider is
// the operator's (the manager's --sidecar-sync-provider).
func ValidateSourceSpec(src *v1beta1.FeatureFlagSource, defaultProvider v1beta1.SyncProviderType) (field.ErrorList, []string) {
	errs := status.ValidateSource(src, defaultProvider)
	var warnings []string
	spec := &src.Spec
	specPath := field.NewPath("spec")

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
		case v == flagdSyncPort:
			errs = append(errs, field.Invalid(specPath.Child(pp.name), v, fmt.Sprintf("flagd serves its sync service on %d in the sidecar", flagdSyncPort)))
		case ports[v] != "":
			errs = append(errs, field.Invalid(specPath.Child(pp.name), v, "the same port as "+ports[v]))
		default:
			ports[v] = "spec." + pp.name
		}
	}

	prefix := spec.EnvVarPrefix
	if prefix == "" {
		prefix = "FLAGD"
	}
	if !envPrefixPattern.MatchString(prefix) {
		errs = append(errs, field.Invalid(specPath.Child("envVarPrefix"), spec.EnvVarPrefix,
			"must be letters, digits and underscores, not starting with a digit"))
	}
	for i, e := range spec.EnvVars {
		for _, msg := range validation.IsEnvVarName(prefix + "_" + e.Name) {
			errs = append(errs, field.Invalid(specPath.Child("envVars").Index(i).Child("name"), e.Name, msg))
		}
	}
	for i, a := range spec.SyncProviderArgs {
		if k, _, ok := strings.Cut(a, "="); !ok || k == "" {
			errs = append(errs, field.Invalid(specPath.Child("syncProviderArgs").Index(i), a, "must be key=value"))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(spec.ContextValues)) {
		if k == "" {
			errs = append(errs, field.Invalid(specPath.Child("contextValues").Key(k), k, "a context key must not be empty"))
		}
	}
	for _, h := range slices.Sorted(maps.Keys(spec.HeaderToContextMappings)) {
		p := specPath.Child("headerToContextMappings").Key(h)
		for _, msg := range validation.IsHTTPHeaderName(h) {
			errs = append(errs, field.Invalid(p, h, msg))
		}
		if spec.HeaderToContextMappings[h] == "" {
			errs = append(errs, field.Invalid(p, "", "the context key must not be empty"))
		}
	}
	for i, o := range spec.CORS {
		if strings.TrimSpace(o) == "" {
			errs = append(errs, field.Invalid(specPath.Child("cors").Index(i), o, "an origin must not be empty"))
		}
	}
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
	for name, req := range spec.Resources.Requests {
		if lim, ok := spec.Resources.Limits[name]; ok && req.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(specPath.Child("resources", "requests").Key(string(name)), req.String(),
				"must not exceed the limit "+lim.String()))
		}
	}
	for i, r := range spec.TargetRefs {
		p := specPath.Child("targetRefs").Index(i).Child("name")
		if strings.Contains(r.Name, "/") {
			errs = append(errs, field.Invalid(p, r.Name, "a source targets workloads of its own namespace: a name, without a namespace"))
			continue
		}
		for _, msg := range validation.IsDNS1123Subdomain(r.Name) {
			errs = append(errs, field.Invalid(p, r.Name, msg))
		}
	}
	if sc, ok := src.Annotations[injection.AnnotationSidecarSecurityContext]; ok {
		if _, err := injection.ParseSecurityContextOverride(sc); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "annotations").Key(injection.AnnotationSidecarSecurityContext), sc, err.Error()))
		}
	}
	return errs, warnings
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
