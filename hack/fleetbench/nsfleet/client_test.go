package nsfleet

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/flagplane/flagplane/api"
	"github.com/flagplane/flagplane/api/v1beta1"
)

func TestClientMapsNamespacesBothWays(t *testing.T) {
	scheme, err := api.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	shared := fake.NewClientBuilder().WithScheme(scheme).Build()
	c := &nsClient{Client: shared, name: "sim-0042"}
	ctx := context.Background()
	ff := &v1beta1.FeatureFlag{}
	ff.Namespace, ff.Name, ff.Labels = "team-a", "checkout", map[string]string{"p": "x"}
	if err := c.Create(ctx, ff); err != nil {
		t.Fatal(err)
	}
	if ff.Namespace != "team-a" {
		t.Errorf("after Create the object's namespace is %q, want the hub's", ff.Namespace)
	}
	var inMember v1beta1.FeatureFlag
	if err := shared.Get(ctx, client.ObjectKey{Namespace: "sim-0042--team-a", Name: "checkout"}, &inMember); err != nil {
		t.Fatalf("the copy is not in the cluster's namespace of the member: %v", err)
	}
	var got v1beta1.FeatureFlag
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "checkout"}, &got); err != nil || got.Namespace != "team-a" {
		t.Fatalf("Get = %q, %v; want the copy in team-a", got.Namespace, err)
	}
	other := &nsClient{Client: shared, name: "sim-0043"}
	var list v1beta1.FeatureFlagList
	if err := other.List(ctx, &list, client.InNamespace("team-a"), client.MatchingLabels{"p": "x"}); err != nil || len(list.Items) != 0 {
		t.Fatalf("another cluster lists %d copies (%v), want none", len(list.Items), err)
	}
	if err := c.List(ctx, &list, client.InNamespace("team-a"), client.MatchingLabels{"p": "x"}); err != nil ||
		len(list.Items) != 1 || list.Items[0].Namespace != "team-a" {
		t.Fatalf("List = %v, %v; want the one copy, in team-a", list.Items, err)
	}
	if err := c.Delete(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if name, ns, ok := Split(NamespaceOf("sim-0042", "team-a")); !ok || name != "sim-0042" || ns != "team-a" {
		t.Errorf("Split(NamespaceOf) = %q %q %v", name, ns, ok)
	}
}
