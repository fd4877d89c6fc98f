// Package workflowstest holds the fixtures that the tests of the workflows
// share, so that each has one home: a cluster in which everything desired
// is applied (Applied), a small world of a flag set, a source and a
// workload with a client (World), a flag set of a given size (LargeFlagSet),
// a cache that sees nothing (EmptyCache), and the time that golden files
// give every condition (FixedTime).
//
// Only tests import it.
package workflowstest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/flagplane/flagplane/api"
	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/configmaps"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/manifests"
	"github.com/flagplane/flagplane/workflows/rbac"
)

// FixedTime replaces the transition times of conditions in golden files.
var FixedTime = metav1.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Applied is what the cache of a cluster in which every desired ConfigMap
// and RBAC object has been applied holds (it implements status.Observed).
type Applied struct {
	View *topology.View
	// Settings are those the ConfigMaps and RBAC were computed with.
	Settings workflows.Settings
}

// ConfigMapData returns the data of the desired ConfigMap.
func (a Applied) ConfigMapData(namespace, name string) (map[string]string, bool) {
	key, ok := a.View.ConfigMapByName(namespace, name)
	if !ok {
		return nil, false
	}
	cm, err := configmaps.Desired(a.View, key, a.Settings)
	if err != nil || cm == nil {
		return nil, false
	}
	return cm.Data, true
}

// WriteFailure knows of no failure.
func (Applied) WriteFailure(string, string, string) workflows.Failure {
	return workflows.Failure{}
}

// Role returns the desired Role.
func (a Applied) Role(namespace, name string) *rbacv1.Role {
	if w, ok := rbac.WorkloadOfName(name); ok {
		roles, _ := rbac.Desired(a.View, w, a.Settings.Generated)
		for _, r := range roles {
			if r.Namespace == namespace {
				return r
			}
		}
	}
	return nil
}

// RoleBinding returns the desired RoleBinding.
func (a Applied) RoleBinding(namespace, name string) *rbacv1.RoleBinding {
	if w, ok := rbac.WorkloadOfName(name); ok {
		_, bindings := rbac.Desired(a.View, w, a.Settings.Generated)
		for _, b := range bindings {
			if b.Namespace == namespace {
				return b
			}
		}
	}
	return nil
}

// World is a flag set, shop/flags, read by a Deployment of its namespace,
// shop/web, through the source shop/src with the file and the kubernetes
// provider, and a client whose cluster holds what is given.
func World(t testing.TB, existing ...client.Object) (*topology.View, client.Client) {
	t.Helper()
	topo := topology.New(flagsets.NewValidator(false).TopologyOptions()...)
	for _, m := range []string{
		`{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlag","metadata":{"namespace":"shop","name":"flags","uid":"ff"},"spec":{"flagSpec":{"flags":{"f":{"state":"ENABLED","variants":{"on":true,"off":false},"defaultVariant":"on"}}}}}`,
		`{"apiVersion":"core.openfeature.dev/v1beta1","kind":"FeatureFlagSource","metadata":{"namespace":"shop","name":"src"},"spec":{"sources":[{"source":"flags"},{"source":"flags","provider":"kubernetes"}],"targetRefs":[{"group":"apps","kind":"Deployment","name":"web"}]}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"shop","name":"web"},"spec":{"template":{"spec":{"containers":[{"name":"app","image":"app"}]}}}}`,
	} {
		if err := manifests.Load(topo, strings.NewReader(m)); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := api.NewScheme()
	return topo.Snapshot(), fake.NewClientBuilder().WithScheme(s).WithObjects(existing...).Build()
}

// EmptyCache is a client whose reads see nothing: the manager's cache,
// which holds only labelled ConfigMaps, Roles and RoleBindings, before it
// has seen any. Writes go through.
type EmptyCache struct{ client.Client }

// Get finds nothing.
func (EmptyCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	return apierrors.NewNotFound(schema.GroupResource{Resource: strings.ToLower(kind) + "s"}, key.Name)
}

// List lists nothing.
func (EmptyCache) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// LargeFlagSet is a valid flag set of namespace/name with flags boolean
// flags, each with a description of 400 bytes in its metadata: about 480
// bytes per flag rendered, so that 2,500 flags are some 1.2 MB, more than a
// ConfigMap holds.
func LargeFlagSet(namespace, name string, flags int) *v1beta1.FeatureFlag {
	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: "ff"}}
	ff.Spec.FlagSpec.Flags = make(map[string]v1beta1.Flag, flags)
	description := strings.Repeat("d", 400)
	for i := range flags {
		ff.Spec.FlagSpec.Flags[fmt.Sprintf("flag-%05d", i)] = v1beta1.Flag{State: v1beta1.FlagStateEnabled, DefaultVariant: "off",
			Variants: []byte(`{"on":true,"off":false}`), Metadata: []byte(`{"description":"` + description + `"}`)}
	}
	return ff
}
