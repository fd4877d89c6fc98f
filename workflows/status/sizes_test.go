package status

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/internal/workflowstest"
)

// TestTooLargeForAConfigMap: a flag set that grew past what a ConfigMap
// holds, read with the file provider, is Stalled with FlagSetTooLarge on
// the FeatureFlag (Ready) and on its source (Programmed), each naming the
// flag set, its size, the limit and what to do, with a Warning Event on
// each; the ConfigMap keeps the last content, and the delivered count says
// it is behind.
func TestTooLargeForAConfigMap(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	fs := topology.FlagSetKey("shop", "flags")
	small, _ := workflowstest.World(t)
	big := workflowstest.LargeFlagSet("shop", "flags", 2500)
	big.Generation = 2
	v, err := small.WithFlagSet(big)
	g.Expect(err).NotTo(HaveOccurred())
	rendered, _ := v.FlagSetRendered(fs)
	src, _ := v.Source(topology.SourceKey("shop", "src"))
	src = src.DeepCopy()
	src.UID, src.Generation = "src", 1
	// The cluster: the ConfigMap with the last content that fitted (the
	// small flag set's), and the two objects.
	smallRendered, _ := small.FlagSetRendered(fs)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: topology.ConfigMapName(fs), Labels: workflows.ManagedLabels()},
		Data: map[string]string{topology.ConfigMapDataKey(fs): smallRendered.Content}}
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1beta1.AddToScheme(s)
	ffObj := big.DeepCopy()
	ffObj.ResourceVersion, src.ResourceVersion = "", ""
	c := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&v1beta1.FeatureFlagSource{}, &v1beta1.FeatureFlag{}).
		WithObjects(cm, ffObj, src).Build()
	recorder := events.NewFakeRecorder(10)
	u := &Updater{Client: c, Settings: workflows.DefaultSettings(), Events: recorder, Failures: &workflows.WriteFailures{}}

	limit := fmt.Sprintf("flag set shop/flags is %d bytes rendered for flagd, more than the 1048576 bytes (1 MiB) the API server lets a ConfigMap hold: "+
		"the file provider cannot deliver it; deliver it with provider flagd-proxy (the sync server, up to 4194304 bytes) or kubernetes, "+
		"or split it into smaller FeatureFlags", rendered.Size)

	g.Expect(u.UpdateSource(ctx, v, topology.SourceKey("shop", "src"))).To(Succeed())
	got := &v1beta1.FeatureFlagSource{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "src"}, got)).To(Succeed())
	programmed := meta.FindStatusCondition(got.Status.Conditions, v1beta1.ConditionProgrammed)
	g.Expect(programmed.Reason).To(Equal(v1beta1.ReasonFlagSetTooLarge))
	// (The world's source reads the flag set with the kubernetes provider
	// too, whose RBAC this cluster lacks.)
	g.Expect(programmed.Message).To(Equal(limit + " (ConfigMap shop/flagd.shop.flags keeps the last content that fitted); " +
		"and waiting for RBAC for Deployment shop/web in namespace shop"))
	g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, v1beta1.ConditionStalled)).To(BeTrue(), "only a user can make it fit")
	g.Expect(recorder.Events).To(Receive(Equal("Warning FlagSetTooLarge " + programmed.Message)))

	g.Expect(u.UpdateFlagSet(ctx, v, fs)).To(Succeed())
	ff := &v1beta1.FeatureFlag{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "flags"}, ff)).To(Succeed())
	ready := meta.FindStatusCondition(ff.Status.Conditions, v1beta1.ConditionReady)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(v1beta1.ReasonFlagSetTooLarge))
	g.Expect(ready.Message).To(Equal("revision " + rendered.Revision + " cannot reach every consumer until a user acts: " + limit +
		"; ConfigMap(s) shop/flagd.shop.flags keep the last content that fitted"))
	g.Expect(meta.IsStatusConditionTrue(ff.Status.Conditions, v1beta1.ConditionStalled)).To(BeTrue())
	g.Expect(meta.IsStatusConditionTrue(ff.Status.Conditions, v1beta1.ConditionAccepted)).To(BeTrue(), "flagd could load it")
	g.Expect(ff.Status.Delivered).To(Equal("0/1"))
	g.Expect(recorder.Events).To(Receive(Equal("Warning FlagSetTooLarge " + ready.Message)))

	// No Event again while nothing changes.
	g.Expect(u.UpdateSource(ctx, v, topology.SourceKey("shop", "src"))).To(Succeed())
	g.Expect(recorder.Events).NotTo(Receive())
}

// TestTooLargeForASyncMessage: provider flagd-proxy carries 4 MiB; a flag
// set past it makes the source's Programmed False (FlagSetTooLarge), and
// the kubernetes provider, which reads the stored FeatureFlag, has no such
// limit.
func TestTooLargeForASyncMessage(t *testing.T) {
	g := NewWithT(t)
	fs := topology.FlagSetKey("shop", "flags")
	v, _ := workflowstest.World(t)
	src, _ := v.Source(topology.SourceKey("shop", "src"))
	src = src.DeepCopy()
	src.Spec.Sources = []v1beta1.Source{{Source: "flags", Provider: v1beta1.SyncProviderFlagdProxy}}
	v, err := v.WithSource(src)
	g.Expect(err).NotTo(HaveOccurred())
	huge, err := v.WithServedFlagSet(workflowstest.LargeFlagSet("shop", "flags", 1), topology.Rendered{
		Content: string(make([]byte, topology.SyncMaxMessageBytes)), Revision: "huge", Size: topology.SyncMaxMessageBytes})
	g.Expect(err).NotTo(HaveOccurred())

	st := DesiredSource(huge, src, workflowstest.Applied{View: huge, Settings: workflows.DefaultSettings()}, workflows.DefaultSettings())
	programmed := meta.FindStatusCondition(st.Conditions, v1beta1.ConditionProgrammed)
	g.Expect(programmed.Reason).To(Equal(v1beta1.ReasonFlagSetTooLarge))
	g.Expect(programmed.Message).To(Equal(fmt.Sprintf("flag set shop/flags is a sync message of %d bytes, more than the 4194304 bytes (4 MiB) "+
		"flagd's sync client takes: provider flagd-proxy cannot deliver it; deliver it with provider kubernetes, or split it into smaller FeatureFlags "+
		"(its sync streams keep the last content that fitted)", topology.SyncMaxMessageBytes+5)))
	ff, _ := huge.FlagSet(fs)
	ffStatus := DesiredFlagSet(huge, ff, workflowstest.Applied{View: huge, Settings: workflows.DefaultSettings()})
	g.Expect(meta.FindStatusCondition(ffStatus.Conditions, v1beta1.ConditionReady).Reason).To(Equal(v1beta1.ReasonFlagSetTooLarge))

	src = src.DeepCopy() // the topology keeps what it was given
	src.Spec.Sources[0].Provider = v1beta1.SyncProviderKubernetes
	kube, err := huge.WithSource(src)
	g.Expect(err).NotTo(HaveOccurred())
	st = DesiredSource(kube, src, workflowstest.Applied{View: kube, Settings: workflows.DefaultSettings()}, workflows.DefaultSettings())
	g.Expect(meta.FindStatusCondition(st.Conditions, v1beta1.ConditionProgrammed).Status).To(Equal(metav1.ConditionTrue))
}
