package staging

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	deliveryv1alpha1 "github.com/flagplane/flagplane/api/delivery/v1alpha1"
	"github.com/flagplane/flagplane/topology"
)

// progressInterval is how often at most a rollout policy's status is
// written while only what its consumers serve changes (the consumer lists,
// the message): the plan's own changes (phase, step, when a step was
// served) are written at once.
const progressInterval = 500 * time.Millisecond

// Pacing remembers when each policy's status was last written. Its zero
// value is ready; it forgets a policy when the policy is deleted.
type Pacing struct {
	mu   sync.Mutex
	last map[topology.Key]time.Time
}

func (w *Pacing) wrote(k topology.Key, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last = map[topology.Key]time.Time{}
	}
	w.last[k] = at
}

// progressWait is how long to wait before writing next over old, when
// next only reports progress and old was written less than
// progressInterval ago; 0 to write now.
func (w *Pacing) progressWait(k topology.Key, old, next deliveryv1alpha1.FeatureFlagRolloutPolicyStatus, now time.Time) time.Duration {
	if !progressOnly(old, next) {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if left := progressInterval - now.Sub(w.last[k]); left > 0 {
		return left
	}
	return 0
}

// progressOnly tells whether two statuses differ in the consumers'
// progress only: the consumer lists, the message and the conditions'
// messages, not the plan nor any condition's status or reason.
func progressOnly(a, b deliveryv1alpha1.FeatureFlagRolloutPolicyStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.Phase != b.Phase || a.Step != b.Step || a.Approved != b.Approved ||
		a.StableRevision != b.StableRevision || a.TargetRevision != b.TargetRevision || a.ReplacedRevision != b.ReplacedRevision ||
		!equality.Semantic.DeepEqual(a.StepServedAt, b.StepServedAt) || !equality.Semantic.DeepEqual(a.StepStartedAt, b.StepStartedAt) ||
		!slices.Equal(a.Unstaged, b.Unstaged) || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason {
			return false
		}
	}
	return true
}

// forget drops a deleted policy's last write.
func (w *Pacing) forget(k topology.Key) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, k)
}

// Len is how many policies' writes are remembered.
func (w *Pacing) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.last)
}
