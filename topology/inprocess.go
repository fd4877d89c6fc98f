package topology

import (
	"github.com/flagplane/flagplane/api/v1beta1"
)

// UpsertInProcessConfig adds or updates an InProcessConfiguration. It applies
// to the workloads whose pod-template annotation
// openfeature.dev/inprocessconfiguration names it.
//
// The Delta, when the spec changed or the object is new (or has a new UID):
// the configuration and its workloads (their env vars). Metadata and status changes give an
// empty Delta.
//
// The topology keeps c: do not modify it afterwards (objects from an
// informer's cache are never modified).
func (t *Topology) UpsertInProcessConfig(c *v1beta1.InProcessConfiguration) (Delta, error) {
	return upsertObject(t, KindInProcessConfig, c, (*tx).upsertIPC)
}

// DeleteInProcessConfig removes an InProcessConfiguration. The Delta: the
// configuration and its workloads.
func (t *Topology) DeleteInProcessConfig(namespace, name string) Delta {
	return deleteObject(t, Key{Kind: KindInProcessConfig, Namespace: namespace, Name: name}, (*tx).deleteIPC)
}

func (edit *tx) upsertIPC(k Key, c *v1beta1.InProcessConfiguration) error {
	if n, ok := edit.state.g.node(k); ok {
		old := n.payload.ipc
		edit.state.g.setPayload(edit.owner, k, payload{ipc: c})
		if InProcessConfigChanged(old, c) {
			edit.mark(k)
			edit.markAll(edit.state.g.children(k, relTargets))
		}
		return nil
	}
	if err := edit.state.g.addNode(edit.owner, k, layerSource, payload{ipc: c}); err != nil {
		return err
	}
	edit.mark(k)
	referrer := payload{ipc: c}
	for _, w := range indexGet(edit.state.annotIPCs, k) {
		if err := edit.retarget(k, referrer, w); err != nil {
			return err
		}
	}
	return nil
}

func (edit *tx) deleteIPC(k Key) error {
	targets := edit.state.g.children(k, relTargets)
	if !edit.state.g.removeNode(edit.owner, k) {
		return nil
	}
	edit.mark(k)
	edit.markAll(targets)
	return nil
}
