package topology

import (
	"fmt"

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
	if c == nil {
		return Delta{}, fmt.Errorf("upserting InProcessConfiguration: nil object")
	}
	if c.Namespace == "" || c.Name == "" {
		return Delta{}, fmt.Errorf("upserting InProcessConfiguration %q in namespace %q: namespace and name are required", c.Name, c.Namespace)
	}
	k := InProcessConfigKey(c.Namespace, c.Name)
	d, err := t.apply(k, func(x *tx) error { return x.upsertIPC(k, c) })
	if err != nil {
		return d, fmt.Errorf("upserting InProcessConfiguration %s: %w", k, err)
	}
	return d, nil
}

// DeleteInProcessConfig removes an InProcessConfiguration. The Delta: the
// configuration and its workloads.
func (t *Topology) DeleteInProcessConfig(namespace, name string) Delta {
	k := InProcessConfigKey(namespace, name)
	return t.mustApply(k, func(x *tx) error { return x.deleteIPC(k) })
}

func (x *tx) upsertIPC(k Key, c *v1beta1.InProcessConfiguration) error {
	if n, ok := x.st.g.node(k); ok {
		old := n.payload.ipc
		x.st.g.setPayload(x.o, k, payload{ipc: c})
		if InProcessConfigChanged(old, c) {
			x.mark(k)
			x.markAll(x.st.g.children(k, relTargets))
		}
		return nil
	}
	if err := x.st.g.addNode(x.o, k, layerSource, payload{ipc: c}); err != nil {
		return err
	}
	x.mark(k)
	p := payload{ipc: c}
	for _, w := range indexGet(x.st.annotIPCs, k) {
		if err := x.retarget(k, p, w); err != nil {
			return err
		}
	}
	return nil
}

func (x *tx) deleteIPC(k Key) error {
	targets := x.st.g.children(k, relTargets)
	if !x.st.g.removeNode(x.o, k) {
		return nil
	}
	x.mark(k)
	x.markAll(targets)
	return nil
}
