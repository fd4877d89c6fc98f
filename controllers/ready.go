package controllers

// GraphBuilt tells whether the topology holds everything in the caches: the
// callbacks of every informer have seen its initial list. Unlike Ready it
// does not wait for the first reconciliation of every node, which only the
// leader does; a standby replica is built too.
func (c *Controller) GraphBuilt() bool { return c.handlerSynced() }
