package console

import (
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/runner"
)

// dueZoned is when a QUEUED job that a schedule's tick made is due, on
// that schedule's clock.
type dueZoned struct {
	// Schedule names the schedule; Zone is its time zone's name.
	Schedule string `json:"schedule"`
	Zone     string `json:"zone"`
	// At is the time due, with the zone's offset; Words says it as the
	// pages do: "tomorrow 23:00 Asia/Kolkata".
	At    time.Time `json:"at"`
	Words string    `json:"words"`
}

// scheduleZones are the registered schedules' time zones, by name.
func (c *console) scheduleZones() map[string]*time.Location {
	out := map[string]*time.Location{}
	for _, p := range c.reg.Schedules() {
		out[p.Name] = p.Location
	}
	return out
}

// dueOnSchedule says when job j is due on the clock of the schedule, of
// zones (scheduleZones), whose tick made its run; nil for a job not
// QUEUED, already due, or of no registered schedule's run.
func dueOnSchedule(j jobView, now time.Time, zones map[string]*time.Location) *dueZoned {
	if j.Status != "QUEUED" || !j.RunAt.After(now) || j.RunID == nil {
		return nil
	}
	name, _, ok := runner.TickOfRun(*j.RunID)
	loc, known := zones[name]
	if !ok || !known {
		return nil
	}
	at := j.RunAt.In(loc)
	return &dueZoned{Schedule: name, Zone: loc.String(), At: at, Words: dayWords(at, now) + " " + loc.String()}
}

// dayWords says t on its own clock against now: "today 23:00", "tomorrow
// 23:00", else "Mon 1 Dec 23:00" (with the year when it is not now's).
func dayWords(t, now time.Time) string {
	now = now.In(t.Location())
	ty, tm, td := t.Date()
	ny, nm, nd := now.Date()
	day := time.Date(ty, tm, td, 0, 0, 0, 0, time.UTC).Sub(time.Date(ny, nm, nd, 0, 0, 0, 0, time.UTC))
	switch {
	case day == 0:
		return "today " + t.Format("15:04")
	case day == 24*time.Hour:
		return "tomorrow " + t.Format("15:04")
	case ty == ny:
		return t.Format("Mon 2 Jan 15:04")
	}
	return t.Format("Mon 2 Jan 2006 15:04")
}
