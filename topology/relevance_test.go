package topology

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
)

func TestRelevance(t *testing.T) {
	g := NewWithT(t)

	ff := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{UID: "u1", Generation: 1}}
	ff.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{"f": {State: "ENABLED", Variants: json.RawMessage(`{"on":true}`), DefaultVariant: "on"}}
	ffStatus := ff.DeepCopy()
	ffStatus.Status.Flags, ffStatus.Labels = 1, map[string]string{"team": "x"}
	ffSpec := ff.DeepCopy()
	ffSpec.Spec.FlagSpec.Flags["g"] = v1beta1.Flag{State: "DISABLED"}
	ffRecreated := ff.DeepCopy()
	ffRecreated.UID = "u2"
	g.Expect(FlagSetChanged(ff, ffStatus)).To(BeFalse(), "status and labels")
	g.Expect(FlagSetChanged(ff, ffSpec)).To(BeTrue())
	g.Expect(FlagSetChanged(ff, ffRecreated)).To(BeTrue())

	src := newSource("shop", "s", ref("flags", ""))
	srcStatus := src.DeepCopy()
	srcStatus.Status.TargetCount, srcStatus.Annotations = 3, map[string]string{"team": "x"}
	srcAnnotation := src.DeepCopy()
	srcAnnotation.Annotations = map[string]string{v1beta1.AnnotationSidecarSecurityContext: `{"runAsUser":1}`}
	srcSettings := src.DeepCopy()
	srcSettings.Spec.Port = 9000
	g.Expect(SourceChanged(src, srcStatus)).To(BeFalse(), "status and unrelated annotations")
	g.Expect(SourceChanged(src, srcAnnotation)).To(BeTrue(), "an annotation the injection reads")
	g.Expect(SourceChanged(src, srcSettings)).To(BeTrue())

	ipc := newIPC("shop", "c", 8015)
	ipcStatus := ipc.DeepCopy()
	ipcStatus.Status.TargetCount = 2
	g.Expect(InProcessConfigChanged(ipc, ipcStatus)).To(BeFalse())
	g.Expect(InProcessConfigChanged(ipc, newIPC("shop", "c", 9000))).To(BeTrue())

	w := deployment("shop", "web", map[string]string{"app": "web"}, map[string]string{
		v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "a, b"})
	restarted := w
	restarted.PodAnnotations = map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "a,b",
		"kubectl.kubernetes.io/restartedAt": "now"}
	g.Expect(WorkloadChanged(w, restarted)).To(BeFalse(), "a rollout restart, and the same references spelt another way")
	reordered := w
	reordered.PodAnnotations = map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: "b,a"}
	g.Expect(WorkloadChanged(w, reordered)).To(BeTrue(), "the order of sources is the order of their settings")
	relabelled := w
	relabelled.Labels = map[string]string{"app": "api"}
	g.Expect(WorkloadChanged(w, relabelled)).To(BeTrue())
	account := w
	account.ServiceAccountName = "other"
	g.Expect(WorkloadChanged(w, account)).To(BeTrue())
}

func TestOwnerKind(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct {
		group, kind string
		want        Kind
	}{
		{"apps", "Deployment", KindDeployment},
		{"apps", "ReplicaSet", "ReplicaSet.apps"},
		{"batch", "CronJob", "CronJob.batch"},
		{"argoproj.io", "Rollout", "Rollout.argoproj.io"},
		{"", "ReplicationController", "ReplicationController"},
		{"", "ConfigMap", "ConfigMap.core"},
	} {
		k := OwnerKind(tc.group, tc.kind)
		g.Expect(k).To(Equal(tc.want))
		g.Expect(k.IsWorkload()).To(BeTrue())
		group, kind := k.GroupKind()
		g.Expect([]string{group, kind}).To(Equal([]string{tc.group, tc.kind}), "round trip of %s", k)
	}
}

func TestParseRef(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct {
		ref      string
		ns, name string
		ok       bool
	}{
		{"flags", "shop", "flags", true},
		{"team/flags", "team", "flags", true},
		{"", "shop", "", false},
		{"/flags", "", "flags", false},
		{"team/", "team", "", false},
		{"a/b/c", "a", "b/c", false},
	} {
		ns, name, ok := ParseRef(tc.ref, "shop")
		g.Expect([]any{ns, name, ok}).To(Equal([]any{tc.ns, tc.name, tc.ok}), tc.ref)
	}
}
