package status

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// DesiredInProcessConfig is the status an InProcessConfiguration should have.
func DesiredInProcessConfig(v *topology.View, c *v1beta1.InProcessConfiguration) v1beta1.InProcessConfigurationStatus {
	status := *c.Status.DeepCopy()
	status.ObservedGeneration = c.Generation
	workloads := v.WorkloadsOfInProcessConfig(topology.InProcessConfigKey(c.Namespace, c.Name))
	status.TargetCount = int32(len(workloads))
	status.Targets = workloadRefs(c.Namespace, workloads)
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: v1beta1.ConditionAccepted, Status: metav1.ConditionTrue,
		Reason: v1beta1.ReasonAccepted, Message: "configuration is valid", ObservedGeneration: c.Generation})
	meta.SetStatusCondition(&status.Conditions, referrersCondition(v, topology.InProcessConfigKey(c.Namespace, c.Name), c.Generation))
	workflows.SetHealth(&status.Conditions, c.Generation, workflows.Judge(status.Conditions, []string{v1beta1.ConditionAccepted}, false,
		fmt.Sprintf("configuration is valid; %d workload(s) use it", len(workloads))))
	return status
}
