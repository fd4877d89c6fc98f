package injection

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
)

// inProcessMerge merges the InProcessConfigurations of a workload into one
// configuration, as the OpenFeature Operator does: it starts from the
// operator's defaults (InProcessOptions) and, in order, a configuration's
// value replaces the current one where it is not the API's default (a port
// other than 8015, a host other than localhost, tls true, a cache other
// than lru, a size other than 1000, a prefix other than FLAGD, any socket
// path, offline path or selector). Their env vars are concatenated, the
// last one of a name winning, in the order the OpenFeature Operator gives
// them. A value that replaces another configuration's value is a
// SettingConflict.
type inProcessMerge struct {
	inj                                                    *Injection
	port                                                   setting[int32]
	host, socketPath, offlinePath, selector, cache, prefix setting[string]
	tls                                                    setting[bool]
	cacheMaxSize                                           setting[int]
	envVars                                                []corev1.EnvVar
	envFrom                                                map[string]topology.Key
}

func newInProcessMerge(inj *Injection) *inProcessMerge {
	return &inProcessMerge{inj: inj}
}

func (m *inProcessMerge) add(k topology.Key, s *v1beta1.InProcessConfigurationSpec) {
	inj := m.inj
	m.port.merge(inj, "in-process port", s.Port, s.Port != 0 && s.Port != DefaultInProcessPort, k)
	m.host.merge(inj, "in-process host", s.Host, s.Host != "" && s.Host != DefaultInProcessHost, k)
	m.socketPath.merge(inj, "in-process socketPath", s.SocketPath, s.SocketPath != "", k)
	m.offlinePath.merge(inj, "in-process offlineFlagSourcePath", s.OfflineFlagSourcePath, s.OfflineFlagSourcePath != "", k)
	m.selector.merge(inj, "in-process selector", s.Selector, s.Selector != "", k)
	m.cache.merge(inj, "in-process cache", s.Cache, s.Cache != "" && s.Cache != DefaultInProcessCache, k)
	m.cacheMaxSize.merge(inj, "in-process cacheMaxSize", s.CacheMaxSize, s.CacheMaxSize != 0 && s.CacheMaxSize != DefaultInProcessCacheMaxSize, k)
	m.prefix.merge(inj, "in-process envVarPrefix", s.EnvVarPrefix, s.EnvVarPrefix != "" && s.EnvVarPrefix != DefaultEnvVarPrefix, k)
	m.tls.merge(inj, "in-process tls", s.TLS, s.TLS, k)
	if len(s.EnvVars) == 0 {
		return
	}
	for _, e := range s.EnvVars {
		if i := envIndex(m.envVars, e.Name); i >= 0 && !envEqual(m.envVars[i], e) {
			inj.Conflicts = append(inj.Conflicts, SettingConflict{Setting: "in-process envVars[" + e.Name + "]",
				Loser: m.envFrom[e.Name], LoserValue: envValue(m.envVars[i]), Winner: k, WinnerValue: envValue(e)})
		}
		setKey(&m.envFrom, e.Name, k)
		m.envVars = append(m.envVars, *e.DeepCopy())
	}
	m.envVars = lastOfEachName(m.envVars)
}

// lastOfEachName keeps the last env var of each name, in the order the
// OpenFeature Operator leaves them after each merge: from the last one
// backwards. Injected env vars are compared in order by tools that check a
// pod against the OpenFeature Operator's, so the order is kept.
func lastOfEachName(in []corev1.EnvVar) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(in))
	for i := len(in) - 1; i >= 0; i-- {
		if envIndex(out, in[i].Name) < 0 {
			out = append(out, in[i])
		}
	}
	return out
}

// env: what points an app's in-process flagd provider at its sync source,
// the env vars the OpenFeature Operator sets, in its order, with what each
// comes from (the configuration that set it, else the first one).
func (m *inProcessMerge) env(opts InProcessOptions) []sourcedEnv {
	first := m.inj.InProcessConfigs[0]
	pick := func(s topology.Key, set bool) topology.Key {
		if set {
			return s
		}
		return first
	}
	prefix := m.prefix.or(opts.EnvVarPrefix)
	var out []sourcedEnv
	add := func(name, value string, from topology.Key) {
		out = append(out, sourcedEnv{env: corev1.EnvVar{Name: EnvVarKey(prefix, name), Value: value}, from: from})
	}
	for _, e := range m.envVars {
		ev := *e.DeepCopy()
		ev.Name = EnvVarKey(prefix, e.Name)
		out = append(out, sourcedEnv{env: ev, from: m.envFrom[e.Name]})
	}
	add(envHost, m.host.or(opts.Host), pick(m.host.from, m.host.set))
	add(envPort, strconv.Itoa(int(m.port.or(opts.Port))), pick(m.port.from, m.port.set))
	add(envTLS, strconv.FormatBool(m.tls.or(opts.TLS)), pick(m.tls.from, m.tls.set))
	add(envCache, m.cache.or(opts.Cache), pick(m.cache.from, m.cache.set))
	add(envCacheMaxSize, strconv.Itoa(m.cacheMaxSize.or(opts.CacheMaxSize)), pick(m.cacheMaxSize.from, m.cacheMaxSize.set))
	add(envResolver, "in-process", first)
	if v := m.socketPath.or(opts.SocketPath); v != "" {
		add(envSocketPath, v, pick(m.socketPath.from, m.socketPath.set))
	}
	if v := m.offlinePath.or(opts.OfflineFlagSourcePath); v != "" {
		add(envOfflinePath, v, pick(m.offlinePath.from, m.offlinePath.set))
	}
	if v := m.selector.or(opts.Selector); v != "" {
		add(envSelector, v, pick(m.selector.from, m.selector.set))
	}
	return out
}
