package node

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// envVar is one variable of a container's environment.
type envVar struct{ name, value string }

// envList is an environment in definition order; a later definition of a
// name replaces the earlier value in place.
type envList struct {
	vars  []envVar
	index map[string]int
}

func (l *envList) set(name, value string) {
	if l.index == nil {
		l.index = map[string]int{}
	}
	if i, ok := l.index[name]; ok {
		l.vars[i].value = value
		return
	}
	l.index[name] = len(l.vars)
	l.vars = append(l.vars, envVar{name, value})
}

func (l *envList) get(name string) (string, bool) {
	i, ok := l.index[name]
	if !ok {
		return "", false
	}
	return l.vars[i].value, true
}

func (l *envList) asMap() map[string]string {
	m := make(map[string]string, len(l.vars))
	for _, v := range l.vars {
		m[v.name] = v.value
	}
	return m
}

func environ(vars []envVar) []string {
	out := make([]string, len(vars))
	for i, v := range vars {
		out[i] = v.name + "=" + v.value
	}
	return out
}

// configError is a container configuration the node cannot satisfy yet
// (a missing ConfigMap or key): the kubelet's CreateContainerConfigError.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

func configErrorf(format string, args ...any) error {
	return &configError{fmt.Sprintf(format, args...)}
}

// envSource reads what a container's environment refers to.
type envSource interface {
	configMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
}

// serviceEnv are the variables of the default/kubernetes Service, which
// the kubelet gives every container, pointing at the API server's real
// address (there is no Service network here).
func serviceEnv(apiServer *url.URL) []envVar {
	host, port := apiServer.Hostname(), apiServer.Port()
	if port == "" {
		port = "443"
	}
	tcp := "tcp://" + host + ":" + port
	prefix := "KUBERNETES_PORT_" + port + "_TCP"
	return []envVar{
		{"KUBERNETES_SERVICE_HOST", host},
		{"KUBERNETES_SERVICE_PORT", port},
		{"KUBERNETES_SERVICE_PORT_HTTPS", port},
		{"KUBERNETES_PORT", tcp},
		{prefix, tcp},
		{prefix + "_PROTO", "tcp"},
		{prefix + "_PORT", port},
		{prefix + "_ADDR", host},
	}
}

// validEnvName is what the kubelet accepts from envFrom (C identifiers
// and more: any printable ASCII, 0x20 to 0x7e, but '=', 0x3d).
var validEnvName = regexp.MustCompile(`^[\x20-\x3c\x3e-\x7e]+$`)

// resolveEnv computes a container's environment as the kubelet does:
// envFrom in order, then env in order with $(VAR) expanded and valueFrom
// resolved, then the service variables for names still free.
func resolveEnv(ctx context.Context, src envSource, pod *corev1.Pod, c *corev1.Container, node *nodeFacts, service []envVar) (*envList, error) {
	env := &envList{}
	for _, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			cm, err := src.configMap(ctx, pod.Namespace, from.ConfigMapRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && ptrTrue(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, lookupError("configmap", pod.Namespace, from.ConfigMapRef.Name, err)
			}
			data = cm.Data
		case from.SecretRef != nil:
			s, err := src.secret(ctx, pod.Namespace, from.SecretRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && ptrTrue(from.SecretRef.Optional) {
					continue
				}
				return nil, lookupError("secret", pod.Namespace, from.SecretRef.Name, err)
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
		for _, k := range sortedKeys(data) {
			if name := from.Prefix + k; validEnvName.MatchString(name) {
				env.set(name, data[k])
			}
		}
	}

	all := &envList{} // what $(VAR) may refer to: env so far, then services
	lookup := func(name string) (string, bool) {
		if v, ok := env.get(name); ok {
			return v, true
		}
		return all.get(name)
	}
	for _, s := range service {
		all.set(s.name, s.value)
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env.set(e.Name, expand(e.Value, lookup))
			continue
		}
		v, ok, err := valueFrom(ctx, src, pod, c, e.ValueFrom, node)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			env.set(e.Name, v)
		}
	}
	for _, s := range service {
		if _, taken := env.get(s.name); !taken {
			env.set(s.name, s.value)
		}
	}
	return env, nil
}

func valueFrom(ctx context.Context, src envSource, pod *corev1.Pod, c *corev1.Container, from *corev1.EnvVarSource, node *nodeFacts) (string, bool, error) {
	switch {
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := src.configMap(ctx, pod.Namespace, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && ptrTrue(ref.Optional) {
				return "", false, nil
			}
			return "", false, lookupError("configmap", pod.Namespace, ref.Name, err)
		}
		if v, ok := cm.Data[ref.Key]; ok {
			return v, true, nil
		}
		if v, ok := cm.BinaryData[ref.Key]; ok {
			return string(v), true, nil
		}
		if ptrTrue(ref.Optional) {
			return "", false, nil
		}
		return "", false, configErrorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		s, err := src.secret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && ptrTrue(ref.Optional) {
				return "", false, nil
			}
			return "", false, lookupError("secret", pod.Namespace, ref.Name, err)
		}
		if v, ok := s.Data[ref.Key]; ok {
			return string(v), true, nil
		}
		if ptrTrue(ref.Optional) {
			return "", false, nil
		}
		return "", false, configErrorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
	case from.FieldRef != nil:
		v, err := podField(pod, from.FieldRef.FieldPath, node)
		return v, err == nil, err
	case from.ResourceFieldRef != nil:
		v, err := resourceField(pod, c, from.ResourceFieldRef, node)
		return v, err == nil, err
	case from.FileKeyRef != nil:
		return "", false, configErrorf("env from a file (fileKeyRef) is not supported by the flagplane test node")
	}
	return "", false, configErrorf("unsupported valueFrom")
}

func lookupError(kind, namespace, name string, err error) error {
	if apierrors.IsNotFound(err) {
		return configErrorf("%s %q not found", kind, name)
	}
	return fmt.Errorf("reading %s %s/%s: %w", kind, namespace, name, err)
}

// allContainers lists init containers, then containers, as pointers into
// the pod.
func allContainers(pod *corev1.Pod) []*corev1.Container {
	out := make([]*corev1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

func ptrTrue(b *bool) bool { return b != nil && *b }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// nodeFacts are what the downward API reads from the node.
type nodeFacts struct {
	ip          string
	allocatable corev1.ResourceList
}
