package restarts

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
)

// RestartedAtAnnotation is the pod-template annotation `kubectl rollout
// restart` sets; setting it the same way rolls a workload's pods.
const RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"

// Restart rolls a workload's pods the way `kubectl rollout restart` does:
// it sets the pod template's RestartedAtAnnotation to at. (The manager's
// admission policy lets it change nothing else of a workload.)
//
// The time keeps its fraction of a second (RFC 3339 with nanoseconds,
// which reads as kubectl's value when there is none): two restarts within
// one second must write two values, or the second changes nothing and
// rolls nothing. A pod admitted just after a restart, still without what
// it should have, is restarted again at once (the healer), often within
// the same second.
func Restart(ctx context.Context, c client.Client, obj client.Object, at time.Time) error {
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`,
		RestartedAtAnnotation, at.UTC().Format(time.RFC3339Nano))
	// Field manager flagplane, as its applies: a workload's managedFields
	// then name flagplane as the owner of this annotation and of nothing
	// else (a GitOps tool's diff can ignore it by that name, e.g. Argo CD's
	// ignoreDifferences managedFieldsManagers), rather than whatever the
	// process's user agent makes of it.
	if err := c.Patch(ctx, obj, client.RawPatch(types.StrategicMergePatchType, []byte(patch)), client.FieldOwner(v1beta1.FieldManager)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("restarting %s %s/%s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName(), err))
	}
	return nil
}
