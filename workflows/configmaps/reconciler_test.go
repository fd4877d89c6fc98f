package configmaps_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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

// TestTooLargeKeepsLastContent: a flag set larger than a ConfigMap may
// hold is not written (the API server would refuse it): the ConfigMap keeps
// its last content; a namespace that starts consuming it gets another
// namespace's copy, or no ConfigMap at all.
func TestTooLargeKeepsLastContent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	fs := topology.FlagSetKey("shop", "flags")
	name, dataKey := topology.ConfigMapName(fs), topology.ConfigMapDataKey(fs)
	old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: workflows.ManagedLabels()},
		Data: map[string]string{dataKey: `{"flags":{}}`}}
	small, c := workflowstest.World(t, old)
	v, err := small.WithFlagSet(workflowstest.LargeFlagSet("shop", "flags", 2500))
	g.Expect(err).NotTo(HaveOccurred())
	rendered, _ := v.FlagSetRendered(fs)
	g.Expect(rendered.Size).To(BeNumerically(">", topology.ConfigMapMaxBytes))

	_, err = configmaps.Desired(v, topology.ConfigMapKey(fs, "shop"), workflows.DefaultSettings())
	var tooLarge *configmaps.TooLargeError
	g.Expect(errors.As(err, &tooLarge)).To(BeTrue(), "got %v", err)
	g.Expect(err).To(MatchError(fmt.Sprintf("flag set shop/flags is %d bytes rendered for flagd, more than the 1048576 bytes (1 MiB) "+
		"the API server lets a ConfigMap hold: the file provider cannot deliver it; deliver it with provider flagd-proxy "+
		"(the sync server, up to 4194304 bytes) or kubernetes, or split it into smaller FeatureFlags", rendered.Size)))

	writes := 0
	noWrites := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
			writes++
			return nil
		},
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			writes++
			return nil
		},
	})
	r := &configmaps.Reconciler{Client: noWrites, Live: noWrites, Settings: workflows.DefaultSettings(), Failures: &workflows.WriteFailures{}}
	g.Expect(r.Reconcile(ctx, v, "shop", name)).To(Succeed(), "nothing to retry until the flag set changes")
	g.Expect(writes).To(BeZero(), "no write the API server refuses")
	got := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(old), got)).To(Succeed())
	g.Expect(got.Data).To(Equal(old.Data), "the last content")

	g.Expect(c.Delete(ctx, got)).To(Succeed())
	g.Expect(r.Reconcile(ctx, v, "shop", name)).To(Succeed())
	g.Expect(writes).To(BeZero(), "no content that fits, no ConfigMap")
}
