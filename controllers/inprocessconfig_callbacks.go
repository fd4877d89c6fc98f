package controllers

import (
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
)

func (c *Controller) inProcessConfigHandler() typedHandler[*v1beta1.InProcessConfiguration] {
	return typedHandler[*v1beta1.InProcessConfiguration]{
		onAdd: c.onInProcessConfigCreated,
		onUpdate: func(old, new *v1beta1.InProcessConfiguration) {
			if topology.InProcessConfigChanged(old, new) {
				c.onInProcessConfigSpecChanged(new)
			}
		},
		onDelete: c.onInProcessConfigDeleted,
	}
}

func (c *Controller) onInProcessConfigCreated(ipc *v1beta1.InProcessConfiguration) {
	c.event(v1beta1.InProcessConfigurationKind, "created")
	c.upsertInProcessConfig(ipc)
}

func (c *Controller) onInProcessConfigSpecChanged(ipc *v1beta1.InProcessConfiguration) {
	c.event(v1beta1.InProcessConfigurationKind, "spec-changed")
	c.upsertInProcessConfig(ipc)
}

func (c *Controller) upsertInProcessConfig(ipc *v1beta1.InProcessConfiguration) {
	d, err := c.topo.UpsertInProcessConfig(ipc)
	if err != nil {
		log.Log.Error(err, "refused by the topology", "InProcessConfiguration", ipc.Namespace+"/"+ipc.Name)
		return
	}
	c.dispatch(d)
}

func (c *Controller) onInProcessConfigDeleted(ipc *v1beta1.InProcessConfiguration) {
	c.event(v1beta1.InProcessConfigurationKind, "deleted")
	c.dispatch(c.topo.DeleteInProcessConfig(ipc.Namespace, ipc.Name))
}
