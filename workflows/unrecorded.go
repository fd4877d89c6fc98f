package workflows

import (
	"slices"
	"sync"

	"github.com/flagplane/flagplane/topology"
)

// UnrecordedRevisions remembers, per FeatureFlag, why the revision history
// (workflows/history) did not record the spec it accepted: the namespace
// holds the manager's bound of revisions, or the API server refused the
// revision (a ResourceQuota, a policy, its size). The history writes it,
// the status of the FeatureFlag reads it (its RevisionRecorded condition),
// as WriteFailures carries failed writes of generated objects to status.
// What it holds lives as long as the process: the next leader finds the
// problem again at its first reconcile. It is safe for concurrent use; the
// zero value is ready, and a nil one remembers nothing.
type UnrecordedRevisions struct {
	mu       sync.Mutex
	m        map[topology.Key]Unrecorded
	onChange []func(topology.Key)
}

// Unrecorded is why a FeatureFlag's accepted spec is not in its history:
// a condition reason and a message for people.
type Unrecorded struct {
	Reason, Message string
}

// OnChange adds fn to what hears of every FeatureFlag whose problem is set,
// changed or cleared. fn must return at once. Call it before Set is first
// called.
func (u *UnrecordedRevisions) OnChange(fn func(flagSet topology.Key)) {
	if u == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.onChange = append(u.onChange, fn)
}

// Set records why flagSet's spec is not recorded, and tells whether that
// changed what was remembered (a new problem, or another one).
func (u *UnrecordedRevisions) Set(flagSet topology.Key, why Unrecorded) bool {
	if u == nil {
		return true
	}
	u.mu.Lock()
	before, had := u.m[flagSet]
	changed := !had || before != why
	if changed {
		if u.m == nil {
			u.m = map[topology.Key]Unrecorded{}
		}
		u.m[flagSet] = why
	}
	fns := slices.Clone(u.onChange)
	u.mu.Unlock()
	if changed {
		for _, fn := range fns {
			fn(flagSet)
		}
	}
	return changed
}

// Clear forgets flagSet's problem (its spec is recorded, or it is gone),
// and tells whether there was one.
func (u *UnrecordedRevisions) Clear(flagSet topology.Key) bool {
	if u == nil {
		return false
	}
	u.mu.Lock()
	_, had := u.m[flagSet]
	delete(u.m, flagSet)
	fns := slices.Clone(u.onChange)
	u.mu.Unlock()
	if had {
		for _, fn := range fns {
			fn(flagSet)
		}
	}
	return had
}

// Of is flagSet's problem, if it has one.
func (u *UnrecordedRevisions) Of(flagSet topology.Key) (Unrecorded, bool) {
	if u == nil {
		return Unrecorded{}, false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	why, ok := u.m[flagSet]
	return why, ok
}

// InNamespace are the FeatureFlags of namespace with a problem, sorted: a
// revision deleted there may make room for theirs.
func (u *UnrecordedRevisions) InNamespace(namespace string) []topology.Key {
	if u == nil {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []topology.Key
	for k := range u.m {
		if k.Namespace == namespace {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, topology.Key.Compare)
	return out
}
