package queue

import (
	"slices"
	"strings"
	"time"
)

// ClosedWindow returns the batch window that keeps a job of kind on queue
// from starting at t, if one does: the queue's (QueueWindow), else the
// kind's (During). ok is false when neither is closed at t, and for a kind
// that is not registered and a queue without a window.
func (r *Registry) ClosedWindow(kind, queue string, t time.Time) (w Window, ok bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if qw := r.windows[queue]; !qw.Open(t) {
		return Window{qw}, true
	}
	if e := r.kinds[kind]; e != nil && !e.defaults.window.Open(t) {
		return e.defaults.window, true
	}
	return Window{}, false
}

// WindowRule is a registered batch window: a queue's (QueueWindow), with
// Kind empty, or a kind's (During), with Queue empty.
type WindowRule struct {
	Queue, Kind string
	Window      Window
}

// Windows returns the registered batch windows: the queues' by name, then
// the kinds' by name.
func (r *Registry) Windows() []WindowRule {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var qs, ks []WindowRule
	for q, w := range r.windows {
		if w.Closes() {
			qs = append(qs, WindowRule{Queue: q, Window: Window{w}})
		}
	}
	for k, e := range r.kinds {
		if e.defaults.window.closes() {
			ks = append(ks, WindowRule{Kind: k, Window: e.defaults.window})
		}
	}
	byName := func(a, b WindowRule) int { return strings.Compare(a.Queue+a.Kind, b.Queue+b.Kind) }
	slices.SortFunc(qs, byName)
	slices.SortFunc(ks, byName)
	return append(qs, ks...)
}
