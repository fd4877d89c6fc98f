package restarts

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestRestart is the one restart patch (the rollout reconciler's and the
// webhook healer's): it sets the pod template's restartedAt to the time
// given, in UTC, as `kubectl rollout restart` does, and changes nothing
// else of the workload.
func TestRestart(t *testing.T) {
	template := func() corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"},
				Annotations: map[string]string{"team": "shop", RestartedAtAnnotation: "2026-01-01T00:00:00Z"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
		}
	}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	meta := metav1.ObjectMeta{Namespace: "shop", Name: "web"}
	// A time in another zone than UTC: the annotation is in UTC.
	at := time.Date(2026, 3, 1, 13, 30, 5, 0, time.FixedZone("CET", 3600))
	const want = "2026-03-01T12:30:05Z"

	for _, tc := range []struct {
		kind     string
		obj      client.Object
		template func(client.Object) *corev1.PodTemplateSpec
	}{
		{"Deployment", &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Selector: selector, Template: template()}},
			func(o client.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.Deployment).Spec.Template }},
		{"StatefulSet", &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Selector: selector, Template: template()}},
			func(o client.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.StatefulSet).Spec.Template }},
		{"DaemonSet", &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: selector, Template: template()}},
			func(o client.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.DaemonSet).Spec.Template }},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			c := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(tc.obj.DeepCopyObject().(client.Object)).Build()

			g.Expect(Restart(ctx, c, tc.obj.DeepCopyObject().(client.Object), at)).To(Succeed())
			got := tc.obj.DeepCopyObject().(client.Object)
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed())
			wantTemplate := template()
			wantTemplate.Annotations[RestartedAtAnnotation] = want
			g.Expect(*tc.template(got)).To(Equal(wantTemplate), "only restartedAt changes, to the time in UTC")

			later := at.Add(time.Minute)
			g.Expect(Restart(ctx, c, got, later)).To(Succeed())
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed())
			g.Expect(tc.template(got).Annotations).To(HaveKeyWithValue(RestartedAtAnnotation, "2026-03-01T12:31:05Z"), "a second restart rolls again")

			// The healer may restart a workload twice within a second (a pod
			// admitted just after the first restart still lacks something):
			// the second restart must change the template too.
			sameSecond := later.Add(300 * time.Millisecond)
			g.Expect(Restart(ctx, c, got, sameSecond)).To(Succeed())
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed())
			g.Expect(tc.template(got).Annotations).To(HaveKeyWithValue(RestartedAtAnnotation, "2026-03-01T12:31:05.3Z"), "a restart within the same second rolls again")
		})
	}

	t.Run("a workload that is gone", func(t *testing.T) {
		c := fake.NewClientBuilder().WithScheme(testScheme()).Build()
		gone := &appsv1.Deployment{ObjectMeta: meta}
		NewWithT(t).Expect(Restart(context.Background(), c, gone, at)).To(Succeed(), "nothing left to roll")
	})
}

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	return s
}
