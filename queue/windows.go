package queue

import "time"

// ClosedWindow returns the batch window that keeps a job of kind on queue
// from starting at t, if one does: the queue's (QueueWindow), else the
// kind's (During). ok is false when neither is closed at t, and for a kind
// that is not registered and a queue without a window.
func (r *Registry) ClosedWindow(kind, queue string, t time.Time) (w Window, ok bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if qw, found := r.windows[queue]; found && qw.loc != nil && !qw.Open(t) {
		return qw, true
	}
	if e, found := r.kinds[kind]; found && e.defaults.window.loc != nil && !e.defaults.window.Open(t) {
		return e.defaults.window, true
	}
	return Window{}, false
}
