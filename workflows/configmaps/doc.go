// Package configmaps keeps the generated ConfigMaps: one per flag set read
// with the file provider and namespace of its workloads, holding exactly
// the flag set's flagd document, which the sidecars mount.
//
// What it computes, from a topology.View and the operator's
// workflows.Settings: Desired, the ConfigMap the graph wants for a key
// (topology.ConfigMapKey), or none when no workload needs it any more; an
// invalid flag set (package flagsets decides) is an InvalidFlagSetError,
// and its ConfigMap keeps the last valid content.
//
// What it applies: the Reconciler creates or applies it with server-side
// apply only when the cache holds something else, never takes over a
// ConfigMap it did not make (workflows.CreateOwned), removes data keys
// others added, and deletes a ConfigMap no workload needs (after
// UnneededGrace for a new one). The Pod webhook writes a pod's ConfigMaps
// through the same Reconciler before admitting it.
package configmaps
