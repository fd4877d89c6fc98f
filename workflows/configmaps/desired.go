package configmaps

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
)

// Desired returns the ConfigMap that the graph wants for key (see
// topology.ConfigMapKey), or nil when no workload needs it any more: Build
// of the graph's ConfigMapFacts.
func Desired(v *topology.View, key topology.Key, s workflows.Settings) (*corev1.ConfigMap, error) {
	return Build(v.ConfigMapFacts(key), s)
}

// Build returns the ConfigMap that facts call for, or nil when no workload
// needs it any more.
//
// Its content is the flag set's rendering in the graph
// (topology.View.ServedFor), made once per edit of the flag set for all
// its ConfigMaps. It returns an *InvalidFlagSetError when the flag set
// cannot be served, a *TooLargeError when its rendering is more than a
// ConfigMap may hold (topology.ConfigMapMaxBytes), a write the API server
// refuses, and a *HeldRevisionError when a rollout holds the namespace at a
// revision whose content is not known: the caller then keeps whatever the
// ConfigMap holds, so that bad input never replaces the last good
// configuration.
func Build(facts topology.ConfigMapFacts, s workflows.Settings) (*corev1.ConfigMap, error) {
	if !facts.Needed {
		return nil, nil
	}
	key, fsKey := facts.Key, facts.Key.FlagSet()
	if facts.FlagSet == nil {
		// A ConfigMap node exists only under a resolved flag set; the graph
		// and the view disagreeing is a bug, not a user error.
		return nil, fmt.Errorf("ConfigMap %s needed but flag set %s is not in the graph", key, fsKey)
	}
	// Its namespace's copy: the flag set's rendering, or the revision a
	// rollout plan holds the namespace at.
	served := facts.Served
	if served.Held {
		return nil, &HeldRevisionError{FlagSet: fsKey, Namespace: key.Namespace, Revision: served.Revision}
	}
	if served.Err != nil {
		return nil, &InvalidFlagSetError{FlagSet: fsKey, Err: served.Err}
	}
	if served.Content == "" {
		return nil, fmt.Errorf("flag set %s has no content: its topology renders no flag set (flagsets.Validator.TopologyOptions)", fsKey)
	}
	if facts.Overflow != nil {
		return nil, &TooLargeError{FlagSet: fsKey, Overflow: *facts.Overflow}
	}
	return object(facts, served.Content, s), nil
}

// object is the ConfigMap of facts holding content.
func object(facts topology.ConfigMapFacts, content string, s workflows.Settings) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        facts.Name,
			Namespace:   facts.Key.Namespace,
			Labels:      s.Generated.ObjectLabels(),
			Annotations: s.Generated.ObjectAnnotations(),
		},
		Data: map[string]string{facts.DataKey: content},
	}
	// Kubernetes only collects garbage by owners of the same namespace.
	if ff := facts.FlagSet; ff != nil && ff.Namespace == facts.Key.Namespace {
		cm.OwnerReferences = ownerReferences(ff)
	}
	return cm
}

// ownerReferences make a ConfigMap in the flag set's own namespace go with it.
func ownerReferences(ff *v1beta1.FeatureFlag) []metav1.OwnerReference {
	if ff.UID == "" {
		return nil
	}
	return []metav1.OwnerReference{{
		APIVersion: v1beta1.GroupVersion.String(),
		Kind:       v1beta1.FeatureFlagKind,
		Name:       ff.Name,
		UID:        ff.UID,
		Controller: ptr.To(true),
	}}
}

// InvalidFlagSetError says that a flag set cannot be served as it is.
type InvalidFlagSetError struct {
	FlagSet topology.Key
	Err     error
}

func (e *InvalidFlagSetError) Error() string {
	return fmt.Sprintf("flag set %s/%s is invalid: %v", e.FlagSet.Namespace, e.FlagSet.Name, e.Err)
}

func (e *InvalidFlagSetError) Unwrap() error { return e.Err }

// TooLargeError says that a flag set's rendering is more than a ConfigMap
// may hold (topology.ConfigMapMaxBytes): the API server would refuse the
// write, so none is made.
type TooLargeError struct {
	FlagSet  topology.Key
	Overflow topology.Overflow
}

func (e *TooLargeError) Error() string { return e.Overflow.Message(e.FlagSet) }

// HeldRevisionError says that a rollout plan gives the ConfigMap a
// revision of its flag set whose content flagplane does not hold (its
// FeatureFlagRevision was not recorded, or not seen yet): the ConfigMap
// keeps what it has.
type HeldRevisionError struct {
	FlagSet   topology.Key
	Namespace string
	Revision  string
}

func (e *HeldRevisionError) Error() string {
	return fmt.Sprintf("the rollout of flag set %s/%s plans revision %s for namespace %s, whose content flagplane does not hold (no FeatureFlagRevision records it)",
		e.FlagSet.Namespace, e.FlagSet.Name, e.Revision, e.Namespace)
}

// kept tells why the ConfigMap of a flag set keeps its last content
// rather than take the flag set as it is now (an *InvalidFlagSetError or a
// *TooLargeError), or returns nil.
func kept(err error) error {
	var invalid *InvalidFlagSetError
	var tooLarge *TooLargeError
	var held *HeldRevisionError
	if errors.As(err, &invalid) || errors.As(err, &tooLarge) || errors.As(err, &held) {
		return err
	}
	return nil
}
