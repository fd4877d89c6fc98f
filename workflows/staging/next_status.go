package staging

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/topology"
)

// servingText says that a step's n consumers serve revision.
func servingText(n int, revision string) string {
	if n == 1 {
		return "its one consumer serves revision " + revision
	}
	return fmt.Sprintf("its %d consumers serve revision %s", n, revision)
}

// stepStatus lists each step's consumers, with what they are planned and
// observed to serve.
func stepStatus(p *deliveryv1alpha1.FeatureFlagRolloutPolicy, plan *topology.RolloutPlan, obs Observation) []deliveryv1alpha1.StepStatus {
	out := make([]deliveryv1alpha1.StepStatus, len(p.Spec.Steps)+1)
	for i := range p.Spec.Steps {
		out[i].Name = p.Spec.Steps[i].Name
		if out[i].Name == "" {
			out[i].Name = "step-" + strconv.Itoa(i+1)
		}
	}
	out[len(p.Spec.Steps)].Name = "rest"
	for _, c := range plan.Consumers {
		s := &out[min(c.Step, len(p.Spec.Steps))]
		if len(s.Consumers) == 64 {
			s.More++
			continue
		}
		s.Consumers = append(s.Consumers, deliveryv1alpha1.ConsumerStatus{Namespace: c.Namespace, Workloads: int32(len(c.Workloads)),
			Planned: c.Revision, Serving: obs.Serving[c.Namespace]})
	}
	if len(out[len(p.Spec.Steps)].Consumers) == 0 {
		out = out[:len(p.Spec.Steps)]
	}
	return out
}

func setProgressing(st *deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, gen int64, running bool, reason, message string) {
	c := metav1.Condition{Type: deliveryv1alpha1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: reason, Message: message, ObservedGeneration: gen}
	if running {
		c.Status = metav1.ConditionTrue
	}
	if c.Message == "" {
		c.Message = reason
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

func keyList(keys []topology.Key, max int) string {
	var names []string
	for _, k := range keys {
		names = append(names, string(k.Kind)+" "+k.Namespace+"/"+k.Name)
	}
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}
