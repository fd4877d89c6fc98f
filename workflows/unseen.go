package workflows

import "sync"

// UnseenWrites remembers the generated objects that flagplane wrote and
// whose informer event has not arrived yet: for each, the resourceVersion
// the write replaced ("" for a create), until an event brings another
// version. Between a write and its event the cache still holds the object
// as it was, so a status that reports what the cluster holds of it would
// report what is about to change; it can wait for the event instead, which
// comes without a timer. It is safe for concurrent use; nil remembers
// nothing.
type UnseenWrites struct {
	mu sync.Mutex
	m  map[ObjectRef]string
}

// Wrote records a write of ref that replaced the version replaced.
func (w *UnseenWrites) Wrote(ref ObjectRef, replaced string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[ObjectRef]string{}
	}
	w.m[ref] = replaced
}

// Seen records an informer event of ref that brought version: unless it is
// the version the last write replaced (an event from before the write,
// delivered late), the write has reached the cache. A deletion counts too.
func (w *UnseenWrites) Seen(ref ObjectRef, version string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if replaced, ok := w.m[ref]; ok && replaced != version {
		delete(w.m, ref)
	}
}

// Unseen tells whether the last write of ref has not reached the cache
// yet, given the version of ref that the cache holds ("" when none): while
// it holds the version the write replaced, it has not. Asking the cache,
// not only counting events, keeps a write whose event came before Wrote
// was called (the watch can be that fast) from being awaited for good.
func (w *UnseenWrites) Unseen(ref ObjectRef, cachedVersion string) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	replaced, ok := w.m[ref]
	if ok && replaced != cachedVersion {
		delete(w.m, ref)
		return false
	}
	return ok
}
