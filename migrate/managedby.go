package migrate

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// flagplaneManagerDeployment is the name of flagplane's manager, installed
// by its chart or config/default, in whatever namespace.
const flagplaneManagerDeployment = "flagplane-manager"

// managedByFlag is the manager's flag that sets the value of
// app.kubernetes.io/managed-by on what it generates.
const managedByFlag = "managed-by"

// ManagedBy reads the value of app.kubernetes.io/managed-by that flagplane
// labels what it generates with from the arguments of its managers on the
// cluster (the Deployments named flagplane-manager): their --managed-by,
// flagplane where they pass none or where there is no manager yet. Managers
// that disagree are an error: say which value with --managed-by.
func ManagedBy(ctx context.Context, c client.Client) (string, error) {
	var list appsv1.DeploymentList
	if err := c.List(ctx, &list, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", flagplaneManagerDeployment)}); err != nil {
		return "", fmt.Errorf("looking for flagplane's manager: %w", err)
	}
	seen := map[string][]string{}
	for _, d := range list.Items {
		v := managedByOf(d.Spec.Template.Spec.Containers)
		seen[v] = append(seen[v], d.Namespace)
	}
	switch len(seen) {
	case 0:
		return v1beta1.ManagedByValue, nil
	case 1:
		for v := range seen {
			return v, nil
		}
	}
	var each []string
	for v, namespaces := range seen {
		sort.Strings(namespaces)
		each = append(each, fmt.Sprintf("%s in %s", v, strings.Join(namespaces, ", ")))
	}
	sort.Strings(each)
	return "", fmt.Errorf("flagplane's managers label what they generate differently (%s=%s): say which value is this install's with --managed-by",
		v1beta1.LabelManagedBy, strings.Join(each, "; "))
}

// managedByOf is the --managed-by of a manager's containers' arguments
// (the last one given wins, as for the flag package), flagplane without one.
func managedByOf(containers []corev1.Container) string {
	v := v1beta1.ManagedByValue
	for _, c := range containers {
		args := append(slices.Clone(c.Command), c.Args...)
		for i, a := range args {
			// -name=value, --name=value, -name value, --name value
			name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
			switch {
			case !strings.HasPrefix(a, "-") || name != managedByFlag:
			case hasValue:
				v = value
			case i+1 < len(args):
				v = args[i+1]
			}
		}
	}
	return v
}

// isFlagdChild tells whether o is controlled by the Flagd of its name: what
// flagplane generates for a Flagd (and the OpenFeature Operator did).
func isFlagdChild(o client.Object) bool {
	ref := metav1.GetControllerOfNoCopy(o)
	return ref != nil && ref.Kind == v1beta1.FlagdKind && strings.HasPrefix(ref.APIVersion, v1beta1.GroupVersion.Group+"/") && ref.Name == o.GetName()
}
