package queue

import (
	"fmt"
	"time"
)

// Window is a daily span of local time in which some jobs may start, such as
// the overnight batch window 23:00 to 05:00. Outside it those jobs stay
// QUEUED and runners do not claim them; a job already running when the
// window closes runs to its end. A window whose end is at or before its start
// crosses midnight. Build one with DailyWindow.
type Window struct {
	start, end time.Duration // since local midnight
	loc        *time.Location
}

// DailyWindow returns the window from start to end, given as "15:04" in loc
// (nil means UTC). It crosses midnight when end is not after start; equal
// start and end make a window that is always open.
func DailyWindow(start, end string, loc *time.Location) (Window, error) {
	s, err := clockTime(start)
	if err != nil {
		return Window{}, err
	}
	e, err := clockTime(end)
	if err != nil {
		return Window{}, err
	}
	if loc == nil {
		loc = time.UTC
	}
	return Window{start: s, end: e, loc: loc}, nil
}

func clockTime(s string) (time.Duration, error) {
	t, err := time.Parse("15:04", s)
	if err != nil {
		return 0, invalid("window time %q is not HH:MM", s)
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute, nil
}

// Open reports whether t falls in the window, on the local clock of the
// window's location.
func (w Window) Open(t time.Time) bool {
	if w.loc == nil || w.start == w.end {
		return true // the zero Window, and a full-day one, never close
	}
	lt := t.In(w.loc)
	since := time.Duration(lt.Hour())*time.Hour + time.Duration(lt.Minute())*time.Minute +
		time.Duration(lt.Second())*time.Second + time.Duration(lt.Nanosecond())
	if w.start < w.end {
		return since >= w.start && since < w.end
	}
	return since >= w.start || since < w.end // across midnight
}

// NextOpen returns when the window next opens after t (t itself if it is
// open), on the window's local clock.
func (w Window) NextOpen(t time.Time) time.Time {
	if w.Open(t) {
		return t
	}
	lt := t.In(w.loc)
	// By the wall clock, not midnight plus a duration: on the day clocks
	// change, the two differ by an hour.
	h, m := int(w.start/time.Hour), int(w.start%time.Hour/time.Minute)
	open := time.Date(lt.Year(), lt.Month(), lt.Day(), h, m, 0, 0, w.loc)
	if !open.After(lt) {
		open = time.Date(lt.Year(), lt.Month(), lt.Day()+1, h, m, 0, 0, w.loc)
	}
	return open
}

// String describes the window, as "23:00-05:00 Asia/Kolkata".
func (w Window) String() string {
	if w.loc == nil {
		return "always"
	}
	f := func(d time.Duration) string { return fmt.Sprintf("%02d:%02d", int(d.Hours()), int(d.Minutes())%60) }
	return f(w.start) + "-" + f(w.end) + " " + w.loc.String()
}

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
		if w.loc == nil || w.Open(now) {
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
		if e.defaults.window.loc != nil && !e.defaults.window.Open(now) {
			kinds = append(kinds, k)
		}
	}
	return queues, kinds
}
