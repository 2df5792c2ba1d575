package queue

import (
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/calendar"
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
	s, ok := calendar.ClockTime(start)
	if !ok {
		return Window{}, invalid("window time %q is not HH:MM", start)
	}
	e, ok := calendar.ClockTime(end)
	if !ok {
		return Window{}, invalid("window time %q is not HH:MM", end)
	}
	if loc == nil {
		loc = time.UTC
	}
	return Window{calendar.Window{Start: s, End: e, Loc: loc}}, nil
}

// Open reports whether t falls in the window, on the local clock of the
// window's location.
func (w Window) Open(t time.Time) bool { return w.w.Open(t) }

// NextOpen returns when the window next opens after t (t itself if it is
// open), on the window's local clock.
func (w Window) NextOpen(t time.Time) time.Time { return w.w.NextOpen(t) }

// String describes the window, as "23:00-05:00 Asia/Kolkata".
func (w Window) String() string { return w.w.String() }

// closes reports whether the window is ever closed: not the zero Window.
func (w Window) closes() bool { return w.w.Closes() }

// During restricts the kind's jobs to a window.
func During(w Window) RegisterOption {
	return kindOption(func(o *jobOptions) error {
		o.window = w
		return nil
	})
}

// QueueWindow restricts a whole queue to a window: runners do not claim
// from it while it is closed. It is the cheaper of the two ways to keep
// jobs in a window (see During), because a closed kind's jobs still have to
// be stepped over by claims from their queue.
func (r *Registry) QueueWindow(queue string, w Window) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.windows == nil {
		r.windows = map[string]Window{}
	}
	r.windows[queue] = w
}

// nextOpening returns the earliest time after now at which a closed window
// of queues qs or of any kind opens; zero if none is closed.
func (r *Registry) nextOpening(now time.Time, qs []string) time.Time {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var next time.Time
	consider := func(w Window) {
		if !w.closes() || w.Open(now) {
			return
		}
		if t := w.NextOpen(now); next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, q := range qs {
		if w, ok := r.windows[q]; ok {
			consider(w)
		}
	}
	for _, e := range r.kinds {
		consider(e.defaults.window)
	}
	return next
}

// closedNow returns, for the moment now, the queues of qs whose window is
// closed and the kinds whose window is closed.
func (r *Registry) closedNow(now time.Time, qs []string) (queues map[string]bool, kinds []string) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	queues = map[string]bool{}
	for _, q := range qs {
		if w, ok := r.windows[q]; ok && !w.Open(now) {
			queues[q] = true
		}
	}
	for k, e := range r.kinds {
		if e.defaults.window.closes() && !e.defaults.window.Open(now) {
			kinds = append(kinds, k)
		}
	}
	return queues, kinds
}
