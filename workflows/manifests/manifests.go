package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/flagplane/flagplane/api"
	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	policyv1alpha1 "github.com/flagplane/flagplane/api/policy/v1alpha1"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
)

// ReferenceGrant's group and kind, as flagplane reads it.
const (
	ReferenceGrantGroup = "gateway.networking.k8s.io"
	ReferenceGrantKind  = "ReferenceGrant"
)

var decoder = func() runtime.Decoder {
	s, _ := api.NewScheme()
	return serializer.NewCodecFactory(s).UniversalDeserializer()
}()

// Load adds the objects of a multi-document YAML stream to a
// topology: FeatureFlags, FeatureFlagSources, InProcessConfigurations, Flagds,
// FeatureFlagSourcePolicies, FeatureFlagRolloutPolicies (with their status),
// FeatureFlagRevisions, Namespaces (their labels),
// Deployments, StatefulSets, DaemonSets and ReferenceGrants. Other kinds are
// skipped. It lets the graph be built offline, from files, exactly as the
// controllers build it from informers.
func Load(t *topology.Topology, r io.Reader) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for i := 0; ; i++ {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw.Raw), []byte("null")) {
			continue
		}
		if err := loadObject(t, raw.Raw); err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
	}
}

func loadObject(t *topology.Topology, raw []byte) error {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return err
	}
	if gvk := u.GroupVersionKind(); gvk.Group == ReferenceGrantGroup && gvk.Kind == ReferenceGrantKind {
		_, err := t.UpsertGrant(GrantFromReferenceGrant(u))
		return err
	}
	obj, _, err := decoder.Decode(raw, nil, nil)
	if err != nil {
		if runtime.IsNotRegisteredError(err) {
			return nil
		}
		return err
	}
	switch obj := obj.(type) {
	case *v1beta1.FeatureFlag:
		_, err = t.UpsertFlagSet(obj)
	case *v1beta1.FeatureFlagSource:
		_, err = t.UpsertSource(obj)
	case *v1beta1.InProcessConfiguration:
		_, err = t.UpsertInProcessConfig(obj)
	case *policyv1alpha1.FeatureFlagSourcePolicy:
		_, err = t.UpsertSourcePolicy(obj)
	case *v1beta1.Flagd:
		_, err = t.UpsertFlagd(obj)
	case *appsv1.Deployment:
		_, err = t.UpsertWorkload(topology.WorkloadFrom(topology.KindDeployment, obj, &obj.Spec.Template))
	case *appsv1.StatefulSet:
		_, err = t.UpsertWorkload(topology.WorkloadFrom(topology.KindStatefulSet, obj, &obj.Spec.Template))
	case *appsv1.DaemonSet:
		_, err = t.UpsertWorkload(topology.WorkloadFrom(topology.KindDaemonSet, obj, &obj.Spec.Template))
	case *deliveryv1alpha1.FeatureFlagRolloutPolicy:
		_, err = t.UpsertRolloutPolicy(obj)
	case *deliveryv1alpha1.FeatureFlagRevision:
		t.UpsertRevision(obj)
	case *corev1.Namespace:
		t.UpsertNamespace(obj.Name, obj.Labels)
	}
	return err
}

// GrantFromReferenceGrant reads a Gateway API ReferenceGrant (any served
// version: v1beta1 and v1 share the schema) as a topology.Grant: its from
// and to entries as they are. The topology decides which hops they permit
// (topology/tenancy.go); entries of kinds flagplane does not use permit
// nothing.
func GrantFromReferenceGrant(u *unstructured.Unstructured) topology.Grant {
	g := topology.Grant{Namespace: u.GetNamespace(), Name: u.GetName()}
	from, _, _ := unstructured.NestedSlice(u.Object, "spec", "from")
	for _, f := range from {
		if m, ok := f.(map[string]any); ok {
			g.From = append(g.From, topology.GrantFrom{Group: str(m["group"]), Kind: str(m["kind"]), Namespace: str(m["namespace"])})
		}
	}
	to, _, _ := unstructured.NestedSlice(u.Object, "spec", "to")
	for _, t := range to {
		if m, ok := t.(map[string]any); ok {
			g.To = append(g.To, topology.GrantTo{Group: str(m["group"]), Kind: str(m["kind"]), Name: str(m["name"])})
		}
	}
	return g
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
