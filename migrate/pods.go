package migrate

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// ofoPod is a pod that runs the OpenFeature Operator's flagd sidecar: a
// container named flagd, and not flagplane's injection.
type ofoPod struct {
	namespace, name string
	owner           Object // the workload to roll, or the pod itself
	configMaps      []string
	kubernetesSync  bool
	flagdProxy      bool
}

func (p ofoPod) key() string { return p.namespace + "/" + p.name }

func (s *scan) ofoPods(ctx context.Context) ([]ofoPod, error) {
	var out []ofoPod
	err := each(ctx, s.c, &corev1.PodList{}, func(obj client.Object) error {
		pod := obj.(*corev1.Pod)
		if _, ours := pod.Annotations[restarts.AnnotationInjection]; ours {
			return nil
		}
		var flagd *corev1.Container
		for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range list {
				if list[i].Name == injection.SidecarName {
					flagd = &list[i]
				}
			}
		}
		if flagd == nil || !topology.OptedIn(pod.Annotations) {
			return nil
		}
		args := strings.Join(flagd.Args, " ")
		p := ofoPod{namespace: pod.Namespace, name: pod.Name,
			kubernetesSync: pod.Annotations[ofoAllowKubernetesSync] == "true" || strings.Contains(args, `"provider":"kubernetes"`),
			flagdProxy:     strings.Contains(args, ofoFlagdProxyService+".")}
		for _, v := range pod.Spec.Volumes {
			if v.ConfigMap != nil {
				p.configMaps = append(p.configMaps, v.ConfigMap.Name)
			}
		}
		owner, err := s.workloadOf(ctx, pod)
		if err != nil {
			return err
		}
		p.owner = owner
		out = append(out, p)
		return nil
	})
	return out, err
}

// workloadOf is the workload whose rollout replaces a pod: its controller,
// or the ReplicaSet's Deployment; the pod itself when it has none.
func (s *scan) workloadOf(ctx context.Context, pod *corev1.Pod) (Object, error) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return Object{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name}, nil
	}
	if ref.Kind == "ReplicaSet" {
		rs := &metav1.PartialObjectMetadata{}
		rs.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
		err := s.c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, rs)
		if err != nil && !apierrors.IsNotFound(err) {
			return Object{}, fmt.Errorf("reading ReplicaSet %s/%s: %w", pod.Namespace, ref.Name, err)
		}
		if up := metav1.GetControllerOf(rs); err == nil && up != nil {
			ref = up
		}
	}
	return Object{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: pod.Namespace, Name: ref.Name}, nil
}

// usedBy lists the pods for which use is true.
func (s *scan) usedBy(use func(ofoPod) bool) []string {
	var out []string
	for _, p := range s.pods {
		if use(p) {
			out = append(out, p.key())
		}
	}
	return out
}

// removeUnlessUsed is a Remove finding, or InUse when pods use it.
func removeUnlessUsed(f Finding, usedBy []string) Finding {
	f.Action = Remove
	if len(usedBy) > 0 {
		f.Action, f.UsedBy = InUse, usedBy
		f.Do = "roll the workloads of these pods (see the rows \"to do\"), then run flagplane migrate --apply again"
	}
	return f
}

// podsToRoll: one row per workload whose pods still run the OpenFeature
// Operator's sidecar.
func (s *scan) podsToRoll(context.Context) error {
	byOwner := map[Object][]string{}
	var owners []Object
	for _, p := range s.pods {
		if _, seen := byOwner[p.owner]; !seen {
			owners = append(owners, p.owner)
		}
		byOwner[p.owner] = append(byOwner[p.owner], p.key())
	}
	for _, o := range owners {
		f := Finding{Object: o, Action: Manual, UsedBy: byOwner[o],
			What:  "pods that still run the OpenFeature Operator's flagd sidecar",
			Means: "they read the flags the way the OpenFeature Operator set them up (its ConfigMaps, its ClusterRoleBinding or its flagd-proxy), which keeps those from being removed"}
		switch o.Kind {
		case "Deployment", "StatefulSet", "DaemonSet":
			f.Do = fmt.Sprintf("kubectl rollout restart %s/%s -n %s: its new pods get flagplane's injection", strings.ToLower(o.Kind), o.Name, o.Namespace)
		case "Pod":
			f.Do = "delete and re-create the pod: flagplane's injector admits the new one"
		default:
			f.Do = fmt.Sprintf("replace its pods (owned by %s %s): their replacements get flagplane's injection", o.Kind, o.Name)
		}
		s.add(f)
	}
	return nil
}
