package configmaps_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/configmaps"
	"github.com/flagplane/flagplane/workflows/internal/workflowstest"
)

// TestForeignKeysRemoved: a generated ConfigMap that holds keys somebody
// else added, and none of flagplane's, ends up holding the flag set alone —
// not nothing (a merge patch from what it held would set data to null).
func TestForeignKeysRemoved(t *testing.T) {
	g := NewWithT(t)
	fs := topology.FlagSetKey("shop", "flags")
	name := topology.ConfigMapName(fs)
	v, c := workflowstest.World(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: workflows.ManagedLabels()},
		Data: map[string]string{"added-by-hand": "x"}})
	r := &configmaps.Reconciler{Client: c, Live: c, Settings: workflows.DefaultSettings(), Failures: &workflows.WriteFailures{}}
	g.Expect(r.Reconcile(context.Background(), v, "shop", name)).To(Succeed())
	got := &corev1.ConfigMap{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: name}, got)).To(Succeed())
	g.Expect(got.Data).To(HaveKey(topology.ConfigMapDataKey(fs)))
	g.Expect(got.Data).NotTo(HaveKey("added-by-hand"))
}
