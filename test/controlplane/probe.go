package controlplane

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// probeDeployment is the Deployment by which Start checks that
// kube-controller-manager works. It lives in kube-system, out of the way of
// the suites, and is deleted before Start returns. Its Pod never runs (there
// is no kubelet), so the image is only a name.
func probeDeployment() *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/name": "flagplane-controlplane-probe"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "flagplane-controlplane-probe"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "probe", Image: "probe"}},
				},
			},
		},
	}
}
