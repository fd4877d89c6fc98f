package node

import (
	"context"
	"errors"
	"net/url"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

type fakeEnvSource struct {
	cms     map[string]*corev1.ConfigMap
	secrets map[string]*corev1.Secret
}

func (f fakeEnvSource) configMap(_ context.Context, _, name string) (*corev1.ConfigMap, error) {
	if cm, ok := f.cms[name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (f fakeEnvSource) secret(_ context.Context, _, name string) (*corev1.Secret, error) {
	if s, ok := f.secrets[name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func TestResolveEnv(t *testing.T) {
	g := NewWithT(t)
	src := fakeEnvSource{
		cms:     map[string]*corev1.ConfigMap{"settings": {Data: map[string]string{"LEVEL": "debug", "bad=name": "x"}}},
		secrets: map[string]*corev1.Secret{"creds": {Data: map[string][]byte{"password": []byte("s3cret")}}},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", UID: "uid-1", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{ServiceAccountName: "web", NodeName: "n1"},
	}
	c := &corev1.Container{
		Name:      "app",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
		EnvFrom:   []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}, Prefix: "APP_"}},
		Env: []corev1.EnvVar{
			{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "NS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "SA", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.serviceAccountName"}}},
			{Name: "APPLABEL", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
			{Name: "MEM_MI", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
			{Name: "CPUS", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
			{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "password"}}},
			{Name: "OPTIONAL", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Key: "k", Optional: ptr.To(true)}}},
			{Name: "URL", Value: "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)/$(POD)/$(LATER)"},
			{Name: "LATER", Value: "x"},
			{Name: "APP_LEVEL", Value: "info"}, // overrides envFrom
		},
	}
	api, _ := url.Parse("https://127.0.0.1:39999")
	facts := &nodeFacts{ip: "127.0.0.1", allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7500m")}}
	env, err := resolveEnv(context.Background(), src, pod, c, facts, serviceEnv(api))
	g.Expect(err).NotTo(HaveOccurred())
	m := env.asMap()
	g.Expect(m).To(HaveKeyWithValue("APP_LEVEL", "info"))
	g.Expect(m).NotTo(HaveKey("APP_bad=name"))
	g.Expect(m).To(HaveKeyWithValue("POD", "web-1"))
	g.Expect(m).To(HaveKeyWithValue("NS", "shop"))
	g.Expect(m).To(HaveKeyWithValue("IP", "127.0.0.1"))
	g.Expect(m).To(HaveKeyWithValue("SA", "web"))
	g.Expect(m).To(HaveKeyWithValue("APPLABEL", "web"))
	g.Expect(m).To(HaveKeyWithValue("MEM_MI", "64"))
	g.Expect(m).To(HaveKeyWithValue("CPUS", "8"), "no limit: the node's allocatable, rounded up")
	g.Expect(m).To(HaveKeyWithValue("PASSWORD", "s3cret"))
	g.Expect(m).NotTo(HaveKey("OPTIONAL"))
	g.Expect(m).To(HaveKeyWithValue("URL", "https://127.0.0.1:39999/web-1/$(LATER)"), "only earlier variables expand")
	g.Expect(m).To(HaveKeyWithValue("KUBERNETES_SERVICE_HOST", "127.0.0.1"))
	g.Expect(m).To(HaveKeyWithValue("KUBERNETES_SERVICE_PORT", "39999"))
	g.Expect(m).To(HaveKeyWithValue("KUBERNETES_SERVICE_PORT_HTTPS", "39999"))
	g.Expect(env.vars[0].name).To(Equal("APP_LEVEL"), "envFrom comes first, in definition order")
}

func TestResolveEnvMissingReferences(t *testing.T) {
	for name, e := range map[string]corev1.EnvVar{
		"configmap": {Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Key: "k"}}},
		"key":       {Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "absent"}}},
		"field":     {Name: "X", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nope"}}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			src := fakeEnvSource{cms: map[string]*corev1.ConfigMap{"settings": {}}}
			_, err := resolveEnv(context.Background(), src, &corev1.Pod{}, &corev1.Container{Env: []corev1.EnvVar{e}}, &nodeFacts{}, nil)
			var cfgErr *configError
			g.Expect(errors.As(err, &cfgErr)).To(BeTrue(), "%v is a CreateContainerConfigError", err)
		})
	}
}
