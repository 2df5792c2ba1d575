package runner

import (
	"cmp"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/calendar"
	"github.com/sheaf-dev/sheaf/queue/internal/check"
)

// NewTiming returns the timing of the schedule name, which fires at expr,
// a cron expression or a preset's (presetErr is why the preset refused its
// arguments, if it did), in loc (nil for UTC). A bad expression is refused
// with an error wrapping check.ErrInvalidOption; the rest is Check's.
func NewTiming(name, expr string, presetErr error, loc *time.Location, catchUp int, grace time.Duration) (Timing, error) {
	c, err := calendar.ParseCron(expr)
	if err = cmp.Or(presetErr, err); err != nil {
		return Timing{}, check.Invalid("schedule %q: %v", name, err)
	}
	return Timing{Name: name, Cron: c, Location: cmp.Or(loc, time.UTC), CatchUp: catchUp, Grace: grace}, nil
}

// Check refuses a timing a registry must not hold, with an error wrapping
// check.ErrInvalidOption: CatchUp outside [0, maxCatchUp], Grace outside
// [1s, 24h] and not 0, or a Cron, spec, that never fires.
func (s *Timing) Check(spec string, maxCatchUp int) error {
	switch {
	case s.CatchUp < 0 || s.CatchUp > maxCatchUp:
		return check.Invalid("schedule %q: missed-tick policy %d not in [0, %d]", s.Name, s.CatchUp, maxCatchUp)
	case s.Grace != 0 && (s.Grace < time.Second || s.Grace > 24*time.Hour):
		return check.Invalid("schedule %q: grace %v not in [1s, 24h]", s.Name, s.Grace)
	case s.Next(time.Now()).IsZero():
		// A date that never comes, such as "0 0 30 2 *": the parser
		// accepts it, and the schedule would never fire.
		return check.Invalid("schedule %q: %q never fires", s.Name, spec)
	}
	return nil
}
