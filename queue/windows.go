package queue

import (
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/registry"
)

// ClosedWindow returns the batch window that keeps a job of kind on queue
// from starting at t, if one does: the queue's (QueueWindow), else the
// kind's (During). ok is false when neither is closed at t, and for a kind
// that is not registered and a queue without a window.
func (r *Registry) ClosedWindow(kind, queue string, t time.Time) (w Window, ok bool) {
	cw, ok := r.r.ClosedWindow(kind, queue, t)
	return Window{cw}, ok
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
	return converted(r.r.Windows(), func(w registry.WindowRule) WindowRule {
		return WindowRule{Queue: w.Queue, Kind: w.Kind, Window: Window{w.Window}}
	})
}
