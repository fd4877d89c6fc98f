package injection

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
)

// The limits of what one pod can carry, which real counterparts enforce
// and which flagplane checks before it injects, so that it never admits a
// pod that then cannot run:
//
//   - Linux's execve refuses an argument or an environment string
//     ("NAME=value") longer than MAX_ARG_STRLEN (MaxArgBytes) with E2BIG,
//     "argument list too long": the container never starts (the kubelet
//     reports CreateContainerError or StartError), and behind a native
//     sidecar that never starts, neither do the app containers. flagd's
//     --sources argument grows with every flag set the sidecar reads (about
//     700 bytes for a 63-character namespace and a 253-character name), so
//     many flag sets, or many sources on one workload, can pass it.
//     Desired leaves the sidecar out then (Refusal), with a warning; the
//     webhook records why on the pod and in an Event. The FeatureFlagSource
//     webhook refuses a source that passes it alone.
//   - ARG_MAX, the total of arguments and environment, is a quarter of
//     the stack limit (2 MiB with the usual 8 MiB): flagplane's injection
//     cannot reach it, as a pod is stored in at most 1.5 MiB (MaxPodBytes).
//   - flagd opens one inotify instance per file source (fsnotify, when it
//     runs in Kubernetes), and Linux allows a user 128 of them by default
//     (fs.inotify.max_user_instances), shared by every flagd sidecar of a
//     node, which all run as the same user: more file sources than that on
//     one node and flagd fails to start ("too many open files"). Nodes may
//     raise the limit, so this is a warning (InotifyInstances), not a
//     refusal.

// MaxArgBytes is the longest argument or environment string that Linux's
// execve takes: MAX_ARG_STRLEN, 32 pages of 4 KiB, less its terminating NUL.
const MaxArgBytes = 32*4096 - 1

// InotifyInstances is Linux's default fs.inotify.max_user_instances: the
// inotify instances one user (every flagd sidecar of a node runs as uid
// 65532) may hold on a node. flagd v0.16 holds one per file source.
const InotifyInstances = 128

// MaxPodBytes is the largest pod the API server stores: etcd's default
// request limit (--max-request-bytes, 1.5 MiB), which a pod's protobuf
// encoding, its key and the transaction around it must fit in. A larger
// pod is refused at creation ("etcdserver: request is too large").
const MaxPodBytes = 3 * 512 * 1024

// Refusal says why a workload's sidecar was left out: it would pass a
// limit that a real counterpart enforces. It is for warnings, Events and
// the pod's record (rollout.AnnotationRefused): its String stays short.
type Refusal struct {
	// What passed the limit: "flagd's --sources argument", "env var
	// FLAGD_X of the sidecar", "the pod".
	What string `json:"what"`
	// Bytes is its size, Limit the limit's, LimitName the limit
	// ("MAX_ARG_STRLEN").
	Bytes     int    `json:"bytes"`
	Limit     int    `json:"limit"`
	LimitName string `json:"limitName"`
	// Sources are the sources the sidecar merged.
	Sources int `json:"sources"`
	// Entries are the --sources entries the sidecar would have had.
	Entries int `json:"entries"`
}

func (r Refusal) String() string {
	msg := fmt.Sprintf("flagd sidecar not injected: %s would be %d bytes, over the %d bytes of %s", r.What, r.Bytes, r.Limit, r.LimitName)
	switch r.LimitName {
	case limitArg:
		msg += " (Linux's longest argument or environment string: flagd could not start, nor the app containers after it)"
	case limitPod:
		msg += " (the largest pod the API server stores)"
	}
	if r.Entries > 0 {
		msg += fmt.Sprintf("; %d flag sources from %d FeatureFlagSource(s): name fewer flag sets per workload", r.Entries, r.Sources)
	}
	return msg
}

// Names of the limits, in Refusal.LimitName.
const (
	limitArg = "MAX_ARG_STRLEN"
	limitPod = "etcd's request limit"
)

// DesiredWithRefusal is Desired, with why the sidecar was left out when
// it would pass a limit of what a pod carries (nil when it was not). The
// admission webhook records it on the pod and in an Event.
func DesiredWithRefusal(v *topology.View, workload topology.Key, opts Options) (*Injection, *Refusal) {
	inj, m := desired(v, workload, opts, false)
	if m == nil {
		return inj, nil
	}
	return inj, m.refusal
}

// overArgLimit says which argument or environment string of the sidecar c
// (its own env, and env: the app env vars it brings, which it gets too) is
// longer than MaxArgBytes (the first one), or nil.
func overArgLimit(c *corev1.Container, env []sourcedEnv) *Refusal {
	for i, a := range c.Args {
		if len(a) <= MaxArgBytes {
			continue
		}
		what := "flagd's argument " + strconv.Itoa(i)
		if i > 0 && len(c.Args[i-1]) > 2 && c.Args[i-1][:2] == "--" {
			what = "flagd's " + c.Args[i-1] + " argument"
		}
		return &Refusal{What: what, Bytes: len(a), Limit: MaxArgBytes, LimitName: limitArg}
	}
	for _, e := range c.Env {
		if n := EnvStringBytes(e); n > MaxArgBytes {
			return &Refusal{What: "env var " + e.Name, Bytes: n, Limit: MaxArgBytes, LimitName: limitArg}
		}
	}
	for _, e := range env {
		if n := EnvStringBytes(e.env); n > MaxArgBytes {
			return &Refusal{What: "env var " + e.env.Name, Bytes: n, Limit: MaxArgBytes, LimitName: limitArg}
		}
	}
	return nil
}

// EnvStringBytes is the length of the "NAME=value" string execve gets for
// an env var; one set from a reference (valueFrom) counts its name only,
// its value being known when the container starts.
func EnvStringBytes(e corev1.EnvVar) int {
	return len(e.Name) + 1 + len(e.Value)
}

// PodRefusal is the Refusal of an injection that makes a pod larger than
// MaxPodBytes (its protobuf encoding, as the API server stores it, with
// room for the rest of etcd's request), or nil. A pod that is too large
// without the injection is not flagplane's to refuse. Most pods are far
// from the limit: they are told so from the sizes of the parts, and only
// a pod near it has the injection applied to a copy to be measured.
func PodRefusal(pod *corev1.Pod, inj *Injection) *Refusal {
	const overhead = 1024 // the key (at most 332 bytes, twice), the type header, the transaction
	const perItem = 16    // a field's tag and length in an enclosing message
	before := pod.Size() + overhead
	if inj.Sidecar == nil || before > MaxPodBytes {
		return nil
	}
	estimate := before + inj.Sidecar.Size() + perItem
	for i := range inj.Volumes {
		estimate += inj.Volumes[i].Size() + perItem
	}
	for i := range inj.Env {
		estimate += (inj.Env[i].Size() + perItem) * len(pod.Spec.Containers)
	}
	for i := range inj.ImagePullSecrets {
		estimate += inj.ImagePullSecrets[i].Size() + perItem
	}
	for k, v := range inj.PodAnnotations {
		estimate += len(k) + len(v) + 2*perItem
	}
	if estimate <= MaxPodBytes {
		return nil
	}
	mutated := pod.DeepCopy()
	inj.ApplyTo(&mutated.Spec)
	after := mutated.Size() + overhead
	for k, v := range inj.PodAnnotations {
		after += len(k) + len(v) + 2*perItem
	}
	if after <= MaxPodBytes {
		return nil
	}
	return &Refusal{What: "the pod", Bytes: after, Limit: MaxPodBytes, LimitName: limitPod,
		Sources: len(inj.Sources), Entries: len(inj.ConfigMaps)}
}

// WithoutSidecar is the injection without its sidecar: no flagd, no
// volumes, ConfigMaps, pull secrets or pod annotations, and none of the
// env vars the sidecar brings to the app containers; the env vars of
// in-process configurations stay. The webhook uses it when the pod the
// sidecar makes would pass a limit (PodRefusal).
func (inj *Injection) WithoutSidecar() *Injection {
	out := *inj
	if inj.Sidecar == nil {
		return &out
	}
	sidecarEnv := inj.Sidecar.Env
	out.Env = nil
	for _, e := range inj.Env {
		brought := false
		for _, s := range sidecarEnv {
			if s.Name == e.Name && envEqual(s, e) {
				brought = true
				break
			}
		}
		if !brought {
			out.Env = append(out.Env, *e.DeepCopy())
		}
	}
	out.Sidecar, out.Volumes, out.ConfigMaps, out.ImagePullSecrets, out.PodAnnotations = nil, nil, nil, nil, nil
	return &out
}

// SourcesArgBytes is the length of flagd's --sources argument that lists
// entries, as the sidecar writes them (distinctSources).
func SourcesArgBytes(entries []FlagdSourceConfig) int {
	b, _ := json.Marshal(distinctSources(entries)) // plain data: cannot fail
	return len(b)
}

// EntryOfSource is the --sources entry that one spec.sources entry of a
// source in namespace gives flagd with provider, as the sidecar of a
// workload of that namespace gets it, from the spec alone: a flag set is
// taken as the entry names it, and a flagd-proxy entry has the sync server
// and credential of opts (none when opts has no sync server, which makes
// its size a lower bound). ok is false for a reference that names no flag
// set.
func EntryOfSource(namespace string, e v1beta1.Source, provider v1beta1.SyncProviderType, opts Options) (cfg FlagdSourceConfig, ok bool) {
	if !provider.ReferencesFlagSet() {
		return remoteSourceConfig(provider, e), true
	}
	ns, name, ok := topology.ParseRef(e.Source, namespace)
	if !ok {
		return FlagdSourceConfig{}, false
	}
	var headers map[string]string
	if provider == v1beta1.SyncProviderFlagdProxy && opts.SyncServer != "" && opts.SyncServerHeaders != nil {
		headers, _ = opts.SyncServerHeaders(namespace)
	}
	return flagSetSourceConfig(provider, topology.FlagSetKey(ns, name), opts, headers), true
}

// flagSetSourceConfig is the --sources entry by which flagd reads flag set
// f with provider (file, kubernetes or flagd-proxy); headers carry the
// sync server's credential of a flagd-proxy entry.
func flagSetSourceConfig(provider v1beta1.SyncProviderType, f topology.Key, opts Options, headers map[string]string) FlagdSourceConfig {
	switch provider {
	case v1beta1.SyncProviderKubernetes:
		return FlagdSourceConfig{URI: f.Namespace + "/" + f.Name, Provider: string(v1beta1.SyncProviderKubernetes)}
	case v1beta1.SyncProviderFlagdProxy:
		cfg := FlagdSourceConfig{URI: opts.SyncServer, Provider: string(v1beta1.SyncProviderGRPC),
			Selector: FlagdProxySelectorPrefix + f.Namespace + "/" + f.Name, TLS: opts.SyncServerTLS, Headers: headers}
		if opts.SyncServerTLS {
			cfg.CertPath = opts.SyncServerCertPath
		}
		return cfg
	default:
		return FlagdSourceConfig{URI: FlagFilePath(f), Provider: string(v1beta1.SyncProviderFile)}
	}
}

// checkLimits records in m.refusal, with a warning, a sidecar c that could
// not start: an argument, or an env string of its own or of env (the app
// env vars it brings, which are its own too), longer than MaxArgBytes. It
// warns of more file sources than InotifyInstances.
func (m *sidecarMerge) checkLimits(c *corev1.Container, env []sourcedEnv) {
	if len(m.configMaps) > InotifyInstances {
		m.inj.Warnings = append(m.inj.Warnings, fmt.Sprintf("the flagd sidecar reads %d flag sets with the file provider, and flagd holds an inotify instance for each: "+
			"Linux allows %d per user by default (fs.inotify.max_user_instances), shared by every flagd sidecar of a node, so flagd will fail to start unless the nodes allow more; "+
			"the kubernetes and flagd-proxy providers need none", len(m.configMaps), InotifyInstances))
	}
	r := overArgLimit(c, env)
	if r == nil {
		return
	}
	r.Sources, r.Entries = len(m.inj.Sources), len(m.entries)
	m.refusal = r
	m.inj.Warnings = append(m.inj.Warnings, r.String())
}

// SourceRefusals are the workloads of a source whose sidecar is refused
// (Desired leaves it out for a limit): how many, the first few, and the
// first refusal.
type SourceRefusals struct {
	Count     int
	Workloads []topology.Key
	First     Refusal
}

func (r SourceRefusals) String() string {
	names := make([]string, len(r.Workloads))
	for i, w := range r.Workloads {
		names[i] = string(w.Kind) + " " + w.Namespace + "/" + w.Name
	}
	list := strings.Join(names, ", ")
	if r.Count > len(r.Workloads) {
		list += fmt.Sprintf(" and %d more", r.Count-len(r.Workloads))
	}
	return fmt.Sprintf("%d workload(s) get no flagd sidecar (%s): %s", r.Count, list, r.First)
}

// RefusalsOfSource tells whether the sidecars of the workloads a source
// applies to are refused, naming at most limit of them (nil when none is).
// The source alone, as for a workload of its own namespace, is measured
// once: refused so, every workload of its is. Otherwise only where another
// source applies too (ContestedWorkloadsOfSource) can a sidecar pass a
// limit that neither passes alone; those are computed as ConflictsOfSource
// computes them. The status of the source reports them.
func RefusalsOfSource(v *topology.View, source topology.Key, limit int, opts Options) *SourceRefusals {
	src, ok := v.Source(source)
	if !ok {
		return nil
	}
	inj := &Injection{Workload: topology.Key{Namespace: source.Namespace}, Sources: []topology.Key{source}}
	m := newSidecarMerge(inj, opts)
	m.mayReadDirectly = func(topology.Key) bool { return true } // tenancy is ResolvedRefs' question
	m.defaultProvider = v.DefaultSyncProvider()
	m.providerArgs = slices.Clone(opts.Sidecar.ProviderArgs)
	m.addSource(v, source, src, opts)
	m.applyPolicies(v.SourcePoliciesOfNamespace(source.Namespace), source.Namespace)
	if len(m.entries) > 0 {
		m.checkLimits(m.container(opts), m.appEnv(opts.Sidecar))
	}
	if m.refusal != nil {
		count, first := v.FirstWorkloadsOfSource(source, limit)
		if count == 0 {
			return nil
		}
		return &SourceRefusals{Count: count, Workloads: first, First: *m.refusal}
	}
	var out *SourceRefusals
	for _, w := range v.ContestedWorkloadsOfSource(source) {
		_, r := DesiredWithRefusal(v, w, opts)
		if r == nil {
			continue
		}
		if out == nil {
			out = &SourceRefusals{First: *r}
		}
		out.Count++
		if len(out.Workloads) < limit {
			out.Workloads = append(out.Workloads, w)
		}
	}
	return out
}
