// Package rbac grants what flagd's kubernetes sync needs: a workload (or a
// Flagd) whose sources read flag sets with the kubernetes provider gets,
// in each namespace holding such a flag set, a Role and a RoleBinding for
// its service account, and nothing more (never a ClusterRole).
//
// What it computes, from a topology.View alone: Desired, the Roles
// (get on exactly the FeatureFlags it reads, list and watch on the
// namespace's FeatureFlags) and RoleBindings of one workload, named Name
// in every namespace (WorkloadOfName is the inverse), and only where the
// tenancy rule lets the workload read (topology.View.MayReadDirectly).
// RoleUpToDate and RoleBindingUpToDate tell whether the cluster's objects
// grant what is desired.
//
// What it applies: the Reconciler applies the Roles and RoleBindings with
// server-side apply, never taking over an object it did not make
// (workflows.CreateOwned), and deletes the ones in namespaces the workload
// no longer reads from, finding them by name through the NameIndex of the
// cache.
package rbac
