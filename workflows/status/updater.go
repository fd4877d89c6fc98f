package status

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// Updater writes the status of FeatureFlags, FeatureFlagSources and
// InProcessConfigurations, only when it differs from what they have. It
// logs through the logger of its context, which names the object of the
// key (its caller's, see workflows.LogKey).
type Updater struct {
	// Client reads from the informer cache and writes to the API server.
	Client client.Client
	// Settings are the operator's: how flag sets are validated, what
	// generated objects carry, what the webhook injects with.
	Settings workflows.Settings
	Writes   func(verb string)
	// Events receives a Warning when a resource turns invalid or unresolved.
	Events events.EventRecorder
	// Failures are the generated objects whose last write failed.
	Failures *workflows.WriteFailures
	// SyncReports are the sync server replicas' reports of their streams;
	// nil knows of none.
	SyncReports *SyncReports
	// Deliveries knows the writes of generated ConfigMaps that are on
	// their way; nil knows of none, and every status is written at once.
	Deliveries Deliveries
	// Unrecorded are the FeatureFlags whose accepted spec the revision
	// history did not record; nil knows of none.
	Unrecorded *workflows.UnrecordedRevisions
	// Confirmer asks the consumers' flagds what they serve; nil asks none,
	// and delivery is what flagplane wrote.
	Confirmer *Confirmer

	mu sync.Mutex
	// replaced holds, per object whose status this updater wrote, the
	// resourceVersion that the write replaced, until the cache has moved past it.
	replaced map[topology.Key]string
}

// observed reads the generated objects from the cache, and knows the write
// failures and the replicas' sync reports.
func (u *Updater) observed(ctx context.Context) CacheObserved { return u.Observed(ctx) }

// Observed is what the cache and the sync reports show of the generated
// objects: what staged rollouts read of their consumers.
func (u *Updater) Observed(ctx context.Context) CacheObserved {
	return CacheObserved{Ctx: ctx, Reader: u.Client, Failures: u.Failures, Sync: u.SyncReports, Unrecorded: u.Unrecorded, Confirmer: u.Confirmer}
}

// UpdateFlagSet writes the status of a FeatureFlag.
func (u *Updater) UpdateFlagSet(ctx context.Context, v *topology.View, key topology.Key) error {
	ff := &v1beta1.FeatureFlag{}
	if err := u.get(ctx, key, ff); err != nil || ff.UID == "" {
		return err
	}
	obs := u.observed(ctx)
	desired := DesiredFlagSet(v, ff, obs)
	if equality.Semantic.DeepEqual(ff.Status, desired) {
		return obs.confirmAgain(desired)
	}
	underway, landed := u.deliveryUnderway(ff, desired)
	if underway {
		log.FromContext(ctx).V(1).Info("status waits for the writes of its ConfigMaps")
		return nil
	}
	if landed {
		// A ConfigMap that desired found stale is no longer being
		// written: its write may have reached the cache after desired
		// was computed. What is not on its way now is in the cache now,
		// so desired is computed once more, from the cache as it is.
		obs = u.observed(ctx)
		desired = DesiredFlagSet(v, ff, obs)
		if equality.Semantic.DeepEqual(ff.Status, desired) {
			return obs.confirmAgain(desired)
		}
	}
	if c := workflows.TurnedFalse(ff.Status.Conditions, desired.Conditions, v1beta1.ConditionAccepted); c != nil {
		workflows.Warn(u.Events, ff, workflows.EventInvalidFlagSet, workflows.ActionValidate, "%s", c.Message)
	}
	if c := workflows.TurnedFalse(ff.Status.Conditions, desired.Conditions, v1beta1.ConditionReady); c != nil && c.Reason == v1beta1.ReasonFlagSetTooLarge {
		workflows.Warn(u.Events, ff, v1beta1.ReasonFlagSetTooLarge, workflows.ActionApply, "%s", c.Message)
	}
	if c := meta.FindStatusCondition(desired.Conditions, v1beta1.ConditionReady); c != nil && c.Reason == v1beta1.ReasonNotConfirmed {
		if before := meta.FindStatusCondition(ff.Status.Conditions, v1beta1.ConditionReady); before == nil || before.Reason != v1beta1.ReasonNotConfirmed {
			workflows.Warn(u.Events, ff, v1beta1.ReasonNotConfirmed, workflows.ActionConfirm, "%s", c.Message)
		}
	}
	ff.Status = desired
	if err := u.write(ctx, key, ff, "revision", desired.Revision, "delivered", desired.Delivered, "confirmed", desired.Confirmed); err != nil {
		return err
	}
	return obs.confirmAgain(desired)
}

// confirmAgain asks for the status of a flag set to be computed again
// while a pod does not confirm its revision: every confirmRecheck, so that
// its pods are wanted again (a confirm.Prober reads a pod nobody wants no
// more), and once a namespace's bound has passed, so that the status says
// Stalled when the bound passes, not up to confirmRecheck later.
func (o CacheObserved) confirmAgain(s v1beta1.FeatureFlagStatus) error {
	return recheckAfter(s.Serving, o.ConfirmNow(), o.ConfirmBound())
}

func recheckAfter(serving []v1beta1.NamespaceServing, now time.Time, bound time.Duration) error {
	var after time.Duration
	for _, ns := range serving {
		if ns.Confirmed >= ns.Pods {
			continue
		}
		wait := confirmRecheck
		if ns.Since != nil {
			// unconfirmed finds it overdue once more than bound has passed.
			if left := ns.Since.Add(bound).Sub(now) + overdueSlack; left > 0 && left < wait {
				wait = left
			}
		}
		if after == 0 || wait < after {
			after = wait
		}
	}
	if after == 0 {
		return nil
	}
	return workflows.RequeueAfter(after)
}

// confirmRecheck is how often the status of a flag set whose pods do not
// all confirm its revision is computed again.
const confirmRecheck = 30 * time.Second

// overdueSlack is how long after a namespace's bound its status is
// computed again: past the bound, whatever the timer's rounding.
const overdueSlack = 100 * time.Millisecond

// Deliveries tells whether a write of a generated ConfigMap is on its way:
// queued, being made, or made and not in the cache yet. The controllers
// implement it over their ConfigMap queue.
type Deliveries interface {
	// Await tells whether a write of the ConfigMap of flagSet in
	// namespace is on its way; if so, the status of flagSet is reconciled
	// again once that write has reached the cache, or has ended without a
	// write.
	Await(flagSet topology.Key, namespace string) bool
}

// deliveryUnderway tells whether the status of a FeatureFlag, desired,
// should wait: a ConfigMap of it that does not hold its revision yet is
// being written (Deliveries.Await), and no write of its ConfigMaps has
// failed. An edit is then reported together with its delivery, in one
// write when the ConfigMaps' informer events bring the key back, instead
// of a write that says "delivered to 0/1" and another moments later. A
// failed write is reported at once; so is a status more than one edit
// behind, so that a flag set edited faster than its ConfigMaps are written
// still shows its generation.
//
// landed tells that a ConfigMap desired found stale is not on its way: its
// write, if one was made, may have reached the cache between the reading
// of desired and this question, and desired must be read again before it
// is written.
func (u *Updater) deliveryUnderway(ff *v1beta1.FeatureFlag, desired v1beta1.FeatureFlagStatus) (underway, landed bool) {
	if u.Deliveries == nil || ff.Generation-ff.Status.ObservedGeneration > 1 {
		return false, false
	}
	for _, c := range desired.Consumers {
		if c.Kind != "ConfigMap" || c.Revision == desired.Revision {
			continue
		}
		if u.Failures.Of(workflows.ObjectRef{Kind: "ConfigMap", Namespace: c.Namespace, Name: c.Name}).Message != "" {
			return false, true
		}
		// Each one awaited, so that the key comes back when any of them
		// is done; it waits again for those still on their way.
		if u.Deliveries.Await(topology.FlagSetKey(ff.Namespace, ff.Name), c.Namespace) {
			underway = true
		} else {
			landed = true
		}
	}
	return underway, landed && !underway
}

// UpdateSource writes the status of a FeatureFlagSource.
func (u *Updater) UpdateSource(ctx context.Context, v *topology.View, key topology.Key) error {
	src := &v1beta1.FeatureFlagSource{}
	if err := u.get(ctx, key, src); err != nil || src.UID == "" {
		return err
	}
	desired := DesiredSource(v, src, u.observed(ctx), u.Settings)
	if equality.Semantic.DeepEqual(src.Status, desired) {
		return nil
	}
	if c := workflows.TurnedFalse(src.Status.Conditions, desired.Conditions, v1beta1.ConditionAccepted); c != nil {
		workflows.Warn(u.Events, src, workflows.EventInvalidSource, workflows.ActionValidate, "%s", c.Message)
	}
	if c := workflows.TurnedFalse(src.Status.Conditions, desired.Conditions, v1beta1.ConditionResolvedRefs); c != nil {
		workflows.Warn(u.Events, src, workflows.EventUnresolvedRefs, workflows.ActionResolve, "%s", c.Message)
	}
	if c := workflows.TurnedFalse(src.Status.Conditions, desired.Conditions, v1beta1.ConditionReferrersPermitted); c != nil {
		workflows.Warn(u.Events, src, workflows.EventReferrersDenied, workflows.ActionResolve, "%s", c.Message)
	}
	if c := workflows.TurnedFalse(src.Status.Conditions, desired.Conditions, v1beta1.ConditionFlagdVersionSupported); c != nil {
		workflows.Warn(u.Events, src, workflows.EventUnsupportedFlagdVersion, workflows.ActionValidate, "%s", c.Message)
	}
	if c := workflows.TurnedFalse(src.Status.Conditions, desired.Conditions, v1beta1.ConditionProgrammed); c != nil && c.Reason == v1beta1.ReasonFlagSetTooLarge {
		workflows.Warn(u.Events, src, v1beta1.ReasonFlagSetTooLarge, workflows.ActionApply, "%s", c.Message)
	}
	src.Status = desired
	return u.write(ctx, key, src)
}

// ReportsProgrammed tells whether the status of a FeatureFlagSource, as
// the cache holds it and with no write of this updater that the cache has
// not seen yet, says Programmed True. A generated ConfigMap that holds the
// current content of its flag set then changes nothing in it: Programmed
// True means no ConfigMap of the source was pending when it was computed,
// and this one is not pending now. Its informer event need not visit the
// source's targets again.
func (u *Updater) ReportsProgrammed(ctx context.Context, key topology.Key) bool {
	src := &v1beta1.FeatureFlagSource{}
	// get refuses (ErrCacheBehind) while the cache holds the version a
	// write of this updater replaced.
	if err := u.get(ctx, key, src); err != nil || src.UID == "" {
		return false
	}
	c := meta.FindStatusCondition(src.Status.Conditions, v1beta1.ConditionProgrammed)
	return c != nil && c.Status == metav1.ConditionTrue && src.Status.ObservedGeneration == src.Generation
}

// UpdateInProcessConfig writes the status of an InProcessConfiguration.
func (u *Updater) UpdateInProcessConfig(ctx context.Context, v *topology.View, key topology.Key) error {
	c := &v1beta1.InProcessConfiguration{}
	if err := u.get(ctx, key, c); err != nil || c.UID == "" {
		return err
	}
	desired := DesiredInProcessConfig(v, c)
	if equality.Semantic.DeepEqual(c.Status, desired) {
		return nil
	}
	if cond := workflows.TurnedFalse(c.Status.Conditions, desired.Conditions, v1beta1.ConditionReferrersPermitted); cond != nil {
		workflows.Warn(u.Events, c, workflows.EventReferrersDenied, workflows.ActionResolve, "%s", cond.Message)
	}
	c.Status = desired
	return u.write(ctx, key, c)
}

// ErrCacheBehind says that the cache is behind the object in the API
// server: it does not hold the status this updater last wrote yet (a
// status computed now would be compared with the one before that write),
// or a write was refused because someone changed the object since the
// cached version. Reconcile the key again a little later.
var ErrCacheBehind = errors.New("the cache is behind the API server")

// get reads an object from the cache; a missing object leaves obj empty. It
// returns ErrCacheBehind while the cache holds the version that this
// updater's last status write replaced: the status it would compare with is
// gone, and the event of the write that replaced it changes no spec, so
// nothing else would bring the key back once the cache catches up. Deciding
// on it could leave a status wrong for good (a source Pending on a ConfigMap
// that was written meanwhile), or write with a stale resourceVersion.
func (u *Updater) get(ctx context.Context, key topology.Key, obj client.Object) error {
	err := u.Client.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading %s from the cache: %w", key, err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if replaced, ok := u.replaced[key]; ok {
		if err == nil && obj.GetResourceVersion() == replaced {
			return fmt.Errorf("status of %s: the cache does not hold the last status write yet: %w", key, ErrCacheBehind)
		}
		delete(u.replaced, key)
	}
	return nil
}

// write writes the status of obj, the object of key; a write is logged at
// V(1) with kv, what it says.
func (u *Updater) write(ctx context.Context, key topology.Key, obj client.Object, kv ...any) error {
	before := obj.GetResourceVersion()
	err := u.Client.Status().Update(ctx, obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if apierrors.IsConflict(err) {
		// Someone changed the object after the version in the cache (a
		// user's edit of its spec): the status computed from that version
		// is not written, and the key goes again once the cache has the
		// change. Not a failure: nobody else writes this status.
		log.FromContext(ctx).V(1).Info("status write raced a change of the object; again once the cache has it")
		return fmt.Errorf("status of %s: the object was changed since the cached version (%w): %w", key, err, ErrCacheBehind)
	}
	if err != nil {
		return fmt.Errorf("writing status of %s %s/%s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	u.mu.Lock()
	if u.replaced == nil {
		u.replaced = map[topology.Key]string{}
	}
	u.replaced[key] = before
	u.mu.Unlock()
	if u.Writes != nil {
		u.Writes("status")
	}
	log.FromContext(ctx).V(1).Info("status written", kv...)
	return nil
}

// CacheObserved implements Observed over a cache-backed reader.
type CacheObserved struct {
	Ctx    context.Context
	Reader client.Reader
	// Failures are the writes that failed; nil knows of none.
	Failures *workflows.WriteFailures
	// Sync are the sync reports of the replicas; nil knows of none.
	Sync *SyncReports
	// Unrecorded are the specs the revision history did not record; nil
	// knows of none.
	Unrecorded *workflows.UnrecordedRevisions
	// Confirmer asks the consumers' flagds what they serve; nil asks none.
	Confirmer *Confirmer
}

// UnrecordedRevision implements HistoryObserved.
func (o CacheObserved) UnrecordedRevision(flagSet topology.Key) (workflows.Unrecorded, bool) {
	return o.Unrecorded.Of(flagSet)
}

// SyncSubscribers implements Observed.
func (o CacheObserved) SyncSubscribers(flagSet topology.Key) []SyncSubscribers {
	return o.Sync.Of(flagSet)
}

// WriteFailure implements Observed.
func (o CacheObserved) WriteFailure(kind, namespace, name string) workflows.Failure {
	return o.Failures.Of(workflows.ObjectRef{Kind: kind, Namespace: namespace, Name: name})
}

var (
	_ Observed        = CacheObserved{}
	_ SyncObserved    = CacheObserved{}
	_ HistoryObserved = CacheObserved{}
	_ ConfirmObserved = CacheObserved{}
)

// ConfigMapData implements Observed.
func (o CacheObserved) ConfigMapData(namespace, name string) (map[string]string, bool) {
	cm := &corev1.ConfigMap{}
	if err := o.Reader.Get(o.Ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm); err != nil {
		return nil, false
	}
	return cm.Data, true
}

// Role implements Observed.
func (o CacheObserved) Role(namespace, name string) *rbacv1.Role {
	r := &rbacv1.Role{}
	if err := o.Reader.Get(o.Ctx, client.ObjectKey{Namespace: namespace, Name: name}, r); err != nil {
		return nil
	}
	return r
}

// RoleBinding implements Observed.
func (o CacheObserved) RoleBinding(namespace, name string) *rbacv1.RoleBinding {
	b := &rbacv1.RoleBinding{}
	if err := o.Reader.Get(o.Ctx, client.ObjectKey{Namespace: namespace, Name: name}, b); err != nil {
		return nil
	}
	return b
}
