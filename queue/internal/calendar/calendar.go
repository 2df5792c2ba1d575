// Package calendar is wall-clock time for package queue: the cron
// expressions of its schedules and the arguments of their presets, and the
// daily windows in which jobs may start. Package queue's Spec and Window
// wrap what is here; it wraps the errors in ErrInvalidOption.
package calendar

import (
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// ParseCron parses a five-field cron expression, or a descriptor such as
// "@daily", as github.com/robfig/cron/v3 does. The time zone is the
// schedule's, so a CRON_TZ= or TZ= prefix is refused; so is "", which no
// constructor of a Spec makes.
func ParseCron(expr string) (cron.Schedule, error) {
	switch {
	case expr == "":
		return nil, errors.New("no Spec: use Cron or a preset")
	case strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ="):
		return nil, fmt.Errorf("Cron(%q): set Periodic.Location instead of a time zone in the expression", expr)
	}
	c, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, fmt.Errorf("Cron(%q): %v", expr, err)
	}
	return c, nil
}

// Arg is a preset's argument and its range.
type Arg struct {
	Name      string
	V, Lo, Hi int
}

// Hour is a preset's hour, 0 to 23.
func Hour(v int) Arg { return Arg{"hour", v, 0, 23} }

// Minute is a preset's minute, 0 to 59.
func Minute(v int) Arg { return Arg{"minute", v, 0, 59} }

// CheckArgs returns the error of the first argument of the preset call out
// of its range; nil if none is.
func CheckArgs(call string, args ...Arg) error {
	for _, a := range args {
		if a.V < a.Lo || a.V > a.Hi {
			return fmt.Errorf("%s: %s %d not in [%d, %d]", call, a.Name, a.V, a.Lo, a.Hi)
		}
	}
	return nil
}

// Named prints a weekday or month by name when it is one, by number when
// not, for a preset's call in its error.
func Named[T interface {
	~int
	String() string
}](v T, known bool) string {
	if known {
		return v.String()
	}
	return strconv.Itoa(int(v))
}

// DaysIn returns the days of month in a leap year, so that February 29th is
// a day a yearly preset may name.
func DaysIn(month time.Month) int {
	return time.Date(2024, month+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// Window is a daily span of local time: from Start to End since local
// midnight in Loc, across midnight when End is not after Start. The zero
// Window, and one whose Start and End are equal, are always open.
type Window struct {
	Start, End time.Duration
	Loc        *time.Location
}

// ClockTime parses "15:04" as the time since midnight; false if it is not.
func ClockTime(s string) (time.Duration, bool) {
	t, err := time.Parse("15:04", s)
	if err != nil {
		return 0, false
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute, true
}

// Closes reports whether the window is ever closed.
func (w Window) Closes() bool { return w.Loc != nil }

// Open reports whether t falls in the window, on the local clock of Loc.
func (w Window) Open(t time.Time) bool {
	if w.Loc == nil || w.Start == w.End {
		return true // the zero Window, and a full-day one, never close
	}
	lt := t.In(w.Loc)
	since := time.Duration(lt.Hour())*time.Hour + time.Duration(lt.Minute())*time.Minute +
		time.Duration(lt.Second())*time.Second + time.Duration(lt.Nanosecond())
	if w.Start < w.End {
		return since >= w.Start && since < w.End
	}
	return since >= w.Start || since < w.End // across midnight
}

// NextOpen returns when the window next opens after t (t itself if it is
// open), on the local clock of Loc.
func (w Window) NextOpen(t time.Time) time.Time {
	if w.Open(t) {
		return t
	}
	lt := t.In(w.Loc)
	// By the wall clock, not midnight plus a duration: on the day clocks
	// change, the two differ by an hour.
	h, m := int(w.Start/time.Hour), int(w.Start%time.Hour/time.Minute)
	open := time.Date(lt.Year(), lt.Month(), lt.Day(), h, m, 0, 0, w.Loc)
	if !open.After(lt) {
		open = time.Date(lt.Year(), lt.Month(), lt.Day()+1, h, m, 0, 0, w.Loc)
	}
	return open
}

// String describes the window, as "23:00-05:00 Asia/Kolkata".
func (w Window) String() string {
	if w.Loc == nil {
		return "always"
	}
	f := func(d time.Duration) string { return fmt.Sprintf("%02d:%02d", int(d.Hours()), int(d.Minutes())%60) }
	return f(w.Start) + "-" + f(w.End) + " " + w.Loc.String()
}

// The presets: each returns its cron expression, and the error of its
// first argument out of range, naming the call.

// Daily is queue.Daily.
func Daily(hour, minute int) (string, error) {
	return fmt.Sprintf("%d %d * * *", minute, hour), CheckArgs(fmt.Sprintf("Daily(%d, %d)", hour, minute), Hour(hour), Minute(minute))
}

// Weekly is queue.Weekly.
func Weekly(day time.Weekday, hour, minute int) (string, error) {
	return fmt.Sprintf("%d %d * * %d", minute, hour, day),
		CheckArgs(fmt.Sprintf("Weekly(%s, %d, %d)", Named(day, day >= time.Sunday && day <= time.Saturday), hour, minute),
			Arg{Name: "weekday", V: int(day), Lo: int(time.Sunday), Hi: int(time.Saturday)}, Hour(hour), Minute(minute))
}

// Monthly is queue.Monthly, and Quarterly with months "1,4,7,10".
func Monthly(call string, months string, day, hour, minute int) (string, error) {
	return fmt.Sprintf("%d %d %d %s *", minute, hour, day, months),
		CheckArgs(fmt.Sprintf("%s(%d, %d, %d)", call, day, hour, minute), Arg{Name: "day", V: day, Lo: 1, Hi: 31}, Hour(hour), Minute(minute))
}

// Yearly is queue.Yearly.
func Yearly(month time.Month, day, hour, minute int) (string, error) {
	known := month >= time.January && month <= time.December
	last := 31
	if known {
		last = DaysIn(month)
	}
	return fmt.Sprintf("%d %d %d %d *", minute, hour, day, month),
		CheckArgs(fmt.Sprintf("Yearly(%s, %d, %d, %d)", Named(month, known), day, hour, minute),
			Arg{Name: "month", V: int(month), Lo: int(time.January), Hi: int(time.December)},
			Arg{Name: "day", V: day, Lo: 1, Hi: last}, Hour(hour), Minute(minute))
}

// Windows are the windows of queues and of kinds, as a registry holds
// them; the caller guards them.
type Windows struct {
	Queues map[string]Window
	Kinds  iter.Seq2[string, Window]
}

// NextOpening returns the earliest time after now at which a closed window
// of queues qs or of any kind opens; zero if none is closed.
func (ws Windows) NextOpening(now time.Time, qs []string) (next time.Time) {
	consider := func(w Window) {
		if w.Open(now) {
			return
		}
		if t := w.NextOpen(now); next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, q := range qs {
		consider(ws.Queues[q])
	}
	for _, w := range ws.Kinds {
		consider(w)
	}
	return next
}

// Closed returns, at now, the queues of qs whose window is closed and the
// kinds whose window is closed.
func (ws Windows) Closed(now time.Time, qs []string) (queues map[string]bool, kinds []string) {
	queues = map[string]bool{}
	for _, q := range qs {
		if !ws.Queues[q].Open(now) {
			queues[q] = true
		}
	}
	for k, w := range ws.Kinds {
		if !w.Open(now) {
			kinds = append(kinds, k)
		}
	}
	return queues, kinds
}

// DailyWindow is queue.DailyWindow, loc given.
func DailyWindow(start, end string, loc *time.Location) (Window, error) {
	s, ok := ClockTime(start)
	if !ok {
		return Window{}, fmt.Errorf("window time %q is not HH:MM", start)
	}
	e, ok := ClockTime(end)
	if !ok {
		return Window{}, fmt.Errorf("window time %q is not HH:MM", end)
	}
	return Window{Start: s, End: e, Loc: loc}, nil
}
