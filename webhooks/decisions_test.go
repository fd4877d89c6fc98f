package webhooks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// logLines is a logger that keeps what is logged at verbosity v or below,
// one JSON object per line, as the manager's zap logger prints them.
func logLines(v int) (context.Context, *[]map[string]any) {
	var lines []map[string]any
	logger := funcr.NewJSON(func(obj string) {
		line := map[string]any{}
		if err := json.Unmarshal([]byte(obj), &line); err == nil {
			lines = append(lines, line)
		}
	}, funcr.Options{Verbosity: v})
	return log.IntoContext(context.Background(), logger), &lines
}

// object is how a JSON line names an object: under its kind,
// {"name","namespace"} (klog.KRef).
func object(namespace, name string) map[string]any {
	return map[string]any{"namespace": namespace, "name": name}
}

// TestDecisionsAreLogged: every admission decision of the Pod injector and
// of the validators is logged with what it was about and what it decided:
// an allowed one at V(1) (--zap-log-level=debug), a denied one at V(0).
func TestDecisionsAreLogged(t *testing.T) {
	reader := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(replicaSetMeta("shop", "web-5d4f8", "web"), replicaSetMeta("shop", "plain-1", "plain")).Build()
	injector := loggedDecisions{newMutator(t, reader, &recordingEnsurer{})}
	podOf := func(rs string, labels map[string]string, dryRun bool) admission.Request {
		req := request(t, admissionv1.Create, podOwnedBy("ReplicaSet", rs, labels), dryRun)
		req.UserInfo = authnv1.UserInfo{Username: "system:serviceaccount:kube-system:replicaset-controller"}
		return req
	}
	valid := &v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout"}}
	valid.Spec.FlagSpec.Flags = map[string]v1beta1.Flag{"f": {State: "ENABLED", Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: "on"}}
	bad := valid.DeepCopy()
	bad.Spec.FlagSpec.Flags["f"] = v1beta1.Flag{State: "ENABLED", Variants: json.RawMessage(`{"on":true,"off":false}`), DefaultVariant: "of"}
	flagSet := func(ff *v1beta1.FeatureFlag) admission.Request {
		req := admissionOf(t, admissionv1.Create, ff, nil)
		req.Kind, req.Name, req.UserInfo = metav1.GroupVersionKind{Group: "core.openfeature.dev", Version: "v1beta1", Kind: "FeatureFlag"}, ff.Name,
			authnv1.UserInfo{Username: "alice"}
		return req
	}
	source := func(mutate func(*v1beta1.FeatureFlagSource)) admission.Request {
		req := admissionOf(t, admissionv1.Create, sourceWith(mutate), nil)
		req.Kind, req.Name, req.DryRun = metav1.GroupVersionKind{Group: "core.openfeature.dev", Version: "v1beta1", Kind: "FeatureFlagSource"}, "flags", ptr.To(true)
		return req
	}

	t.Run("at V(1), every decision: what was injected, why nothing was, what was validated", func(t *testing.T) {
		g := NewWithT(t)
		ctx, lines := logLines(1)
		g.Expect(injector.Handle(ctx, podOf("web-5d4f8", map[string]string{"app": "web", "pod-template-hash": "5d4f8"}, false)).Allowed).To(BeTrue())
		g.Expect(injector.Handle(ctx, podOf("plain-1", nil, true)).Allowed).To(BeTrue())
		g.Expect(loggedDecisions{&FlagSetValidator{}}.Handle(ctx, flagSet(valid)).Allowed).To(BeTrue())
		g.Expect(loggedDecisions{&SourceValidator{}}.Handle(ctx, source(func(*v1beta1.FeatureFlagSource) {})).Allowed).To(BeTrue())

		g.Expect(*lines).To(HaveExactElements(
			And(HaveKeyWithValue("msg", "admission allowed"), HaveKeyWithValue("level", BeEquivalentTo(1)),
				HaveKeyWithValue("kind", "Pod"), HaveKeyWithValue("Pod", object("shop", "")), HaveKeyWithValue("generateName", "web-5d4f8-"),
				HaveKeyWithValue("operation", "CREATE"), HaveKeyWithValue("dryRun", false), HaveKeyWithValue("allowed", true),
				HaveKeyWithValue("user", "system:serviceaccount:kube-system:replicaset-controller"),
				HaveKeyWithValue("reason", And(HavePrefix("injected for deployment:shop/web: flagd sidecar "),
					ContainSubstring("flag sets shop/checkout"), ContainSubstring("from FeatureFlagSource shop/flags"))),
				HaveKeyWithValue("patches", BeNumerically(">", 1))),
			And(HaveKeyWithValue("msg", "admission allowed"), HaveKeyWithValue("generateName", "plain-1-"), HaveKeyWithValue("dryRun", true),
				HaveKeyWithValue("reason", "nothing to inject: no source or in-process configuration applies to deployment:shop/plain"),
				HaveKeyWithValue("patches", BeEquivalentTo(1))),
			And(HaveKeyWithValue("msg", "admission allowed"), HaveKeyWithValue("kind", "FeatureFlag"), HaveKeyWithValue("FeatureFlag", object("shop", "checkout")),
				HaveKeyWithValue("user", "alice"), HaveKeyWithValue("allowed", true), HaveKeyWithValue("reason", "valid"), Not(HaveKey("generateName"))),
			And(HaveKeyWithValue("msg", "admission allowed"), HaveKeyWithValue("kind", "FeatureFlagSource"), HaveKeyWithValue("FeatureFlagSource", object("shop", "flags")),
				HaveKeyWithValue("dryRun", true), HaveKeyWithValue("reason", "valid")),
		))
	})

	t.Run("at V(0), denials only", func(t *testing.T) {
		g := NewWithT(t)
		ctx, lines := logLines(0)
		g.Expect(injector.Handle(ctx, podOf("web-5d4f8", map[string]string{"app": "web", "pod-template-hash": "5d4f8"}, false)).Allowed).To(BeTrue())
		g.Expect(loggedDecisions{&FlagSetValidator{}}.Handle(ctx, flagSet(valid)).Allowed).To(BeTrue())
		g.Expect(loggedDecisions{&FlagSetValidator{}}.Handle(ctx, flagSet(bad)).Allowed).To(BeFalse())
		g.Expect(loggedDecisions{&SourceValidator{}}.Handle(ctx, source(func(s *v1beta1.FeatureFlagSource) { s.Spec.LogFormat = "text" })).Allowed).To(BeFalse())
		undecodable := podOf("web-5d4f8", nil, false)
		undecodable.Object.Raw = []byte(`{"metadata":`)
		g.Expect(injector.Handle(ctx, undecodable).Allowed).To(BeFalse())

		g.Expect(*lines).To(HaveExactElements(
			And(HaveKeyWithValue("msg", "admission denied"), HaveKeyWithValue("level", BeEquivalentTo(0)),
				HaveKeyWithValue("kind", "FeatureFlag"), HaveKeyWithValue("FeatureFlag", object("shop", "checkout")),
				HaveKeyWithValue("operation", "CREATE"), HaveKeyWithValue("dryRun", false), HaveKeyWithValue("allowed", false),
				HaveKeyWithValue("code", BeEquivalentTo(422)),
				HaveKeyWithValue("reason", ContainSubstring(`spec.flagSpec.flags[f].defaultVariant: Invalid value: "of"`))),
			And(HaveKeyWithValue("msg", "admission denied"), HaveKeyWithValue("kind", "FeatureFlagSource"), HaveKeyWithValue("dryRun", true),
				HaveKeyWithValue("reason", ContainSubstring("spec.logFormat"))),
			And(HaveKeyWithValue("msg", "admission denied"), HaveKeyWithValue("kind", "Pod"), HaveKeyWithValue("code", BeEquivalentTo(400)),
				HaveKeyWithValue("reason", HavePrefix("decoding the pod"))),
		))
		for _, l := range *lines {
			g.Expect(strings.ToLower(l["msg"].(string))).NotTo(ContainSubstring("allowed"))
		}
	})
}
