package webhooks

import (
	"context"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// FuzzPodMutator: whatever a pod create carries, the webhook answers (it
// never panics) and allows it: it must never block a pod.
func FuzzPodMutator(f *testing.F) {
	seed, _ := json.Marshal(podOwnedBy("StatefulSet", "db", nil))
	f.Add(string(seed), false)
	f.Add(`{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","controller":true}],"labels":{"pod-template-hash":"1"}}}`, true)
	f.Add(`{"metadata":{"annotations":{"openfeature.dev/enabled":"true","openfeature.dev/featureflagsource":"a,/,b/c/d"}},"spec":{"containers":[{"name":"flagd"}]}}`, false)
	f.Add(`{"spec":{"initContainers":[{"name":"flagd"}],"volumes":[{"name":"x"}]}}`, false)
	reader := fake.NewClientBuilder().WithScheme(testScheme(f)).WithObjects(replicaSetMeta("shop", "web-5d4f8", "web")).Build()
	m := newMutator(f, reader, &recordingEnsurer{})
	m.WorkloadWait = 0
	f.Fuzz(func(t *testing.T, pod string, dryRun bool) {
		resp := m.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "1", Operation: admissionv1.Create, Namespace: "shop", DryRun: ptr.To(dryRun),
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: runtime.RawExtension{Raw: []byte(pod)},
		}})
		if !resp.Allowed && resp.Result.Code != 400 {
			t.Fatalf("a decodable pod was refused: %v", resp.Result)
		}
	})
}

// FuzzValidateSourceSpec: the FeatureFlagSource rules never panic.
func FuzzValidateSourceSpec(f *testing.F) {
	f.Add(`{"metadata":{"name":"x","annotations":{"flagplane.core.openfeature.dev/sidecar-security-context":"{}"}},"spec":{"sources":[{"source":"a/b","provider":"kubernetes"}],"port":8015}}`)
	f.Add(`{"spec":{"sources":[{"source":"grpcs://:","provider":"grpc"},{"source":"gs://","provider":"gcs"},{"source":"http://[::1","provider":"http"}],"envVarPrefix":"1","headerToContextMappings":{"":""},"resources":{"requests":{"cpu":"2"},"limits":{"cpu":"1"}}}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		var src v1beta1.FeatureFlagSource
		if json.Unmarshal([]byte(doc), &src) != nil {
			return
		}
		_, _ = ValidateSourceSpec(&src, v1beta1.SyncProviderFile)
	})
}
