package queue

import (
	"cmp"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/calendar"
	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/registry"
)

// Window is a daily span of local time in which some jobs may start, such as
// the overnight batch window 23:00 to 05:00. Outside it those jobs stay
// QUEUED and runners do not claim them; a job already running when the
// window closes runs to its end. A window whose end is at or before its start
// crosses midnight. Build one with DailyWindow.
type Window struct{ w calendar.Window }

// DailyWindow returns the window from start to end, given as "15:04" in loc
// (nil means UTC). It crosses midnight when end is not after start; equal
// start and end make a window that is always open.
func DailyWindow(start, end string, loc *time.Location) (Window, error) {
	w, err := calendar.DailyWindow(start, end, cmp.Or(loc, time.UTC))
	if err != nil {
		return Window{}, check.Invalid("%v", err)
	}
	return Window{w}, nil
}

// Open reports whether t falls in the window, on the local clock of the
// window's location.
func (w Window) Open(t time.Time) bool { return w.w.Open(t) }

// NextOpen returns when the window next opens after t (t itself if it is
// open), on the window's local clock.
func (w Window) NextOpen(t time.Time) time.Time { return w.w.NextOpen(t) }

// String describes the window, as "23:00-05:00 Asia/Kolkata".
func (w Window) String() string { return w.w.String() }

// During restricts the kind's jobs to a window.
func During(w Window) RegisterOption {
	return kindOption(func(o *jobOptions) error { o.Window = w.w; return nil })
}

// QueueWindow restricts a whole queue to a window: runners do not claim
// from it while it is closed. It is the cheaper of the two ways to keep
// jobs in a window (see During), because a closed kind's jobs still have to
// be stepped over by claims from their queue.
func (r *Registry) QueueWindow(queue string, w Window) { r.r.SetQueueWindow(queue, w.w) }

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
