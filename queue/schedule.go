package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/sheaf-dev/sheaf/queue/internal/run"
	"gorm.io/gorm"
)

// Clock tells the time for schedules and windows. Runs, leases and retries
// use the database's clock instead; this one is the wall clock that decides
// when it is 23:00 in Kolkata. Tests and demonstrations inject their own.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once the clock has moved d
	// past now.
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the real clock, the default: SystemClock{}.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// A Spec says when a schedule fires: a cron expression, made by Cron or by a
// preset (Daily, Weekly, Monthly, Quarterly, Yearly). Presets check their
// arguments, and a Spec they refuse carries the reason, which
// Registry.Schedule returns. The zero Spec is refused.
type Spec struct {
	expr string
	err  error // why a preset refused its arguments
}

// String returns the cron expression.
func (s Spec) String() string { return s.expr }

// Cron returns the Spec of a five-field cron expression (minute, hour, day
// of month, month, day of week), or of a descriptor such as "@daily", as
// github.com/robfig/cron/v3 parses them. Registry.Schedule checks it. The
// time zone is Periodic.Location, so a CRON_TZ= or TZ= prefix is refused.
func Cron(expr string) Spec { return Spec{expr: expr} }

func (s Spec) parse() (cron.Schedule, error) {
	switch {
	case s.err != nil:
		return nil, s.err
	case s.expr == "":
		return nil, errors.New("no Spec: use Cron or a preset")
	case strings.HasPrefix(s.expr, "TZ=") || strings.HasPrefix(s.expr, "CRON_TZ="):
		return nil, fmt.Errorf("Cron(%q): set Periodic.Location instead of a time zone in the expression", s.expr)
	}
	c, err := cron.ParseStandard(s.expr)
	if err != nil {
		return nil, fmt.Errorf("Cron(%q): %v", s.expr, err)
	}
	return c, nil
}

// The presets below cover the usual nightly, weekly, monthly, quarterly and
// yearly work. Each takes local wall-clock times in the schedule's Location,
// hour 0 to 23 and minute 0 to 59.

// Daily fires every day at hour:minute.
func Daily(hour, minute int) Spec {
	return preset(fmt.Sprintf("Daily(%d, %d)", hour, minute), fmt.Sprintf("%d %d * * *", minute, hour),
		bounded{"hour", hour, 0, 23}, bounded{"minute", minute, 0, 59})
}

// Weekly fires every week on day at hour:minute.
func Weekly(day time.Weekday, hour, minute int) Spec {
	return preset(fmt.Sprintf("Weekly(%s, %d, %d)", named(day, day >= time.Sunday && day <= time.Saturday), hour, minute),
		fmt.Sprintf("%d %d * * %d", minute, hour, day),
		bounded{"weekday", int(day), int(time.Sunday), int(time.Saturday)}, bounded{"hour", hour, 0, 23}, bounded{"minute", minute, 0, 59})
}

// Monthly fires on day (1 to 31) of every month at hour:minute. Months
// without that day (the 31st of April, say) have no tick, as in cron; use 28
// or earlier for a tick every month.
func Monthly(day, hour, minute int) Spec {
	return preset(fmt.Sprintf("Monthly(%d, %d, %d)", day, hour, minute), fmt.Sprintf("%d %d %d * *", minute, hour, day),
		bounded{"day", day, 1, 31}, bounded{"hour", hour, 0, 23}, bounded{"minute", minute, 0, 59})
}

// Quarterly fires on day (1 to 31) of January, April, July and October at
// hour:minute; a day April lacks has no tick in April, as for Monthly.
func Quarterly(day, hour, minute int) Spec {
	return preset(fmt.Sprintf("Quarterly(%d, %d, %d)", day, hour, minute), fmt.Sprintf("%d %d %d 1,4,7,10 *", minute, hour, day),
		bounded{"day", day, 1, 31}, bounded{"hour", hour, 0, 23}, bounded{"minute", minute, 0, 59})
}

// Yearly fires on day of month every year at hour:minute. February 29th
// fires in leap years only.
func Yearly(month time.Month, day, hour, minute int) Spec {
	known := month >= time.January && month <= time.December
	last := 31
	if known {
		last = time.Date(2024, month+1, 0, 0, 0, 0, 0, time.UTC).Day() // 2024 is a leap year
	}
	return preset(fmt.Sprintf("Yearly(%s, %d, %d, %d)", named(month, known), day, hour, minute),
		fmt.Sprintf("%d %d %d %d *", minute, hour, day, month),
		bounded{"month", int(month), int(time.January), int(time.December)}, bounded{"day", day, 1, last},
		bounded{"hour", hour, 0, 23}, bounded{"minute", minute, 0, 59})
}

// bounded is a preset's argument and its range.
type bounded struct {
	name      string
	v, lo, hi int
}

// preset returns the Spec of expr, or one that carries the first argument
// out of its range.
func preset(call, expr string, args ...bounded) Spec {
	for _, a := range args {
		if a.v < a.lo || a.v > a.hi {
			return Spec{expr: expr, err: fmt.Errorf("%s: %s %d not in [%d, %d]", call, a.name, a.v, a.lo, a.hi)}
		}
	}
	return Spec{expr: expr}
}

// named prints a weekday or month by name when it is one, by number when not.
func named[T interface {
	~int
	String() string
}](v T, known bool) string {
	if known {
		return v.String()
	}
	return strconv.Itoa(int(v))
}

// MissedPolicy says what a schedule does about ticks that passed while no
// process was running it. A tick less than a minute old (or two poll
// intervals, if longer) when a runner starts is not missed: it is due, and
// fires then, once.
type MissedPolicy int

const (
	// SkipMissed forgets missed ticks: the schedule resumes at its next
	// tick. The default: a nightly report for a night long past is rarely
	// wanted, and the morning review lists what did not run.
	SkipMissed MissedPolicy = iota
	// RunMissedOnce runs the most recent missed tick once, when a process
	// starts, however many were missed.
	RunMissedOnce
)

// Tick is one firing of a schedule.
type Tick struct {
	Schedule string
	// At is the tick's time in the schedule's location.
	At time.Time
	// RunID names the run: every job the tick creates, and every job their
	// completion releases, carries it. "name@2006-01-02T15:04:05Z07:00".
	RunID string
	// Period is the tick's local date, 2006-01-02: dependency rules group
	// parents by it.
	Period string
}

// Periodic creates jobs at the ticks of a cron expression in a time zone.
//
// Every runner process runs the registered schedules; a tick creates its
// jobs exactly once between them (the tick is claimed by locking the
// schedule's row, and each job's idempotency key names the tick), so run as
// many runners as you like.
//
// Times in a daylight-saving gap (02:30 on the night clocks go forward, in
// many zones) do not exist, and such a tick is skipped, as the cron parser
// does; a time in the hour that repeats when clocks go back fires once, not
// twice. Schedule nightly work outside 01:00-03:00 to stay clear of both.
type Periodic struct {
	// Name identifies the schedule in runs and in the database; keep it
	// stable.
	Name string
	// Spec says when it fires: a preset (Daily, Weekly, Monthly, Quarterly,
	// Yearly) or Cron.
	Spec Spec
	// Location is the time zone of Spec; nil means UTC.
	Location *time.Location
	// Jobs returns the jobs of a tick. Options are applied as Enqueue's;
	// the run, period and idempotency key are set for you.
	Jobs func(t Tick) []Params
	// Missed is the policy for missed ticks.
	Missed MissedPolicy
}

type schedule struct {
	Periodic
	cron cron.Schedule
}

// Next returns the schedule's first tick after t, in its location, or an
// error for a bad Spec.
func (p Periodic) Next(t time.Time) (time.Time, error) {
	c, err := p.Spec.parse()
	if err != nil {
		return time.Time{}, invalid("schedule %q: %v", p.Name, err)
	}
	loc := p.Location
	if loc == nil {
		loc = time.UTC
	}
	return nextTick(c, t.In(loc)), nil
}

// Schedule registers p, or replaces the schedule of the same name; running
// runners pick the change up at once. It returns an error wrapping
// ErrInvalidOption for a bad name, spec or missing Jobs function.
func (r *Registry) Schedule(p Periodic) error {
	if p.Name == "" || len(p.Name) > 200 {
		return invalid("schedule name must have 1 to 200 bytes")
	}
	if err := checkText("schedule name", p.Name); err != nil {
		return err
	}
	if p.Jobs == nil {
		return invalid("schedule %q: nil Jobs function", p.Name)
	}
	c, err := p.Spec.parse()
	if err != nil {
		return invalid("schedule %q: %v", p.Name, err)
	}
	if p.Location == nil {
		p.Location = time.UTC
	}
	s := &schedule{Periodic: p, cron: c}
	if s.next(time.Now()).IsZero() {
		// A date that never comes, such as Cron("0 0 30 2 *"): the parser
		// accepts it, and the schedule would never fire.
		return invalid("schedule %q: %q never fires", p.Name, p.Spec)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.schedules[p.Name] = s
	r.notifyChangeLocked()
	return nil
}

// Unschedule removes the schedule called name and reports whether there was
// one. Jobs it already created are not touched.
func (r *Registry) Unschedule(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.schedules[name]
	delete(r.schedules, name)
	r.notifyChangeLocked()
	return ok
}

func (r *Registry) notifyChangeLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// schedulesNow returns the schedules and a channel closed when they change.
func (r *Registry) schedulesNow() (map[string]*schedule, <-chan struct{}) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string]*schedule, len(r.schedules))
	for k, v := range r.schedules {
		out[k] = v
	}
	return out, r.changed
}

func (s *schedule) tick(at time.Time) Tick {
	local := at.In(s.Location)
	return Tick{
		Schedule: s.Name, At: local,
		RunID:  s.Name + "@" + local.Format(time.RFC3339),
		Period: local.Format("2006-01-02"),
	}
}

// next returns the schedule's first tick after t, skipping a tick whose local
// wall-clock time is not after t's: that is the hour repeated when clocks go
// back, which would otherwise make a second nightly run of the same night.
func (s *schedule) next(t time.Time) time.Time { return nextTick(s.cron, t.In(s.Location)) }

func nextTick(c cron.Schedule, t time.Time) time.Time {
	n := c.Next(t)
	for !n.IsZero() && !wallClock(n).After(wallClock(t)) {
		n = c.Next(n)
	}
	return n
}

// wallClock is t's local date and time, read as if it were UTC, so that two
// times with the same local reading compare equal whatever their offsets.
func wallClock(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// latest returns the schedule's last tick at or before now that is after
// since, and how many ticks passed in between; zero if none.
func (s *schedule) latest(since, now time.Time) (last time.Time, n int) {
	for t := s.next(since); !t.IsZero() && !t.After(now); t = s.next(t) {
		last, n = t, n+1
		if n == 1_000_000 {
			break // a minutely schedule left for two years; enough counting
		}
	}
	return last, n
}

// scheduler is a runner's part that runs the registry's schedules: it fires
// each tick when the clock reaches it, in whichever runner gets there first.
type scheduler struct {
	c       *Client
	cfg     config
	log     *slog.Logger
	observe func(Event)
	loop    run.Loop
}

// Start starts firing the registry's schedules.
func (sc *scheduler) Start(ctx context.Context) { sc.loop.Start(ctx, sc.run) }

// Stop stops firing, waiting for a tick under way.
func (sc *scheduler) Stop() { sc.loop.Stop() }

func (sc *scheduler) run(ctx context.Context) {
	// Each schedule's next tick, as this runner sees it. Keyed by the
	// schedule itself, not its name, so that a schedule replaced under the
	// same name starts afresh on its own timetable.
	known := map[*schedule]time.Time{}
	for ctx.Err() == nil {
		scheds, changed := sc.c.reg.schedulesNow()
		now := sc.cfg.clock.Now()
		wake := time.Time{}
		for _, s := range scheds {
			next, ok := known[s]
			if !ok {
				next = sc.startSchedule(ctx, s, now)
			}
			for !next.IsZero() && !next.After(now) && ctx.Err() == nil {
				if !sc.fire(ctx, s, next) {
					break // the database failed; try this tick again shortly
				}
				next = s.next(next)
			}
			known[s] = next
			due := next
			if !next.IsZero() && !next.After(now) {
				due = now.Add(sc.cfg.poll)
			}
			if !due.IsZero() && (wake.IsZero() || due.Before(wake)) {
				wake = due
			}
		}
		for s := range known {
			if scheds[s.Name] != s {
				delete(known, s) // unscheduled or replaced
			}
		}
		var timer <-chan time.Time
		if !wake.IsZero() {
			timer = sc.cfg.clock.After(wake.Sub(now))
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-timer:
		}
	}
}

// missedGrace is how old a tick must be, when a runner first sees its
// schedule, to count as missed. A younger one is merely due: another runner
// may be about to fire it (its timer a little late, or a retry after a
// database error pending), and skipping it would lose it. Due ticks are
// fired like any other, and fire creates each tick's jobs once.
func (sc *scheduler) missedGrace() time.Duration { return max(time.Minute, 2*sc.cfg.poll) }

// startSchedule brings a schedule's row up to date when a runner first sees
// it, applying its missed-tick policy to ticks older than missedGrace, and
// returns the first tick still to fire.
func (sc *scheduler) startSchedule(ctx context.Context, s *schedule, now time.Time) time.Time {
	cutoff := now.Add(-sc.missedGrace())
	from := now // a new schedule starts with its next tick, not its last one
	var missed time.Time
	err := sc.c.st.Tx(ctx, sc.c.db, func(tx *gorm.DB) error {
		last, found, err := sc.c.st.LockSchedule(tx, s.Name)
		if err != nil {
			return err
		}
		if !found {
			return sc.c.st.AddSchedule(tx, s.Name, now)
		}
		from = last
		if last.Before(cutoff) {
			from = cutoff
		}
		latest, n := s.latest(last, cutoff)
		if n == 0 {
			return nil
		}
		if s.Missed == RunMissedOnce {
			missed = latest // fired below, by the same path as any tick
			sc.log.Warn("queue: schedule missed ticks; running the latest once", "schedule", s.Name, "missed", n, "tick", latest)
			return nil
		}
		sc.log.Warn("queue: schedule missed ticks; skipping them", "schedule", s.Name, "missed", n, "latest", latest)
		return sc.c.st.SetLastTick(tx, s.Name, latest)
	})
	if err != nil && ctx.Err() == nil { // a runner that stops as it starts has nothing to report
		sc.log.Error("queue: could not start schedule; retrying at its next tick", "schedule", s.Name, "err", err)
	}
	if !missed.IsZero() {
		sc.fire(ctx, s, missed)
	}
	return s.next(from)
}

// fire creates the jobs of one tick, unless another runner did: the tick is
// claimed by moving the schedule's last tick past it under the row's lock,
// in the same transaction as the jobs. It reports false if the database
// failed, so that the tick is tried again. A tick whose jobs cannot be built
// is spent without jobs (see tickJobs).
func (sc *scheduler) fire(ctx context.Context, s *schedule, at time.Time) bool {
	t := s.tick(at)
	var created int
	var unbuilt error // why the tick created nothing
	var enqueued []Enqueued
	var hooksDone func(EnqueueResult) // once the hooks have seen the tick's jobs
	err := sc.c.st.Tx(ctx, sc.c.db, func(tx *gorm.DB) error {
		if err := sc.c.st.AddSchedule(tx, s.Name, at.Add(-time.Nanosecond)); err != nil {
			return err
		}
		last, _, err := sc.c.st.LockSchedule(tx, s.Name)
		if err != nil {
			return err
		}
		if !last.Before(at) {
			return nil // another runner fired it
		}
		var rows []newJob
		rows, unbuilt = tickJobs(sc.c, s, t)
		if len(rows) > 0 {
			ctx := ctx
			if len(sc.cfg.hooks) > 0 { // the runner's: its client's and its own
				ctx, hooksDone = enqueueHooks(ctx, sc.cfg.hooks, &EnqueueCall{Operation: opSchedule, Schedule: s.Name}, rows)
			}
			out, err := sc.c.Tx(tx).insert(ctx, rows)
			if err != nil {
				return err
			}
			enqueued = out
			for _, o := range out {
				if !o.Duplicate {
					created++
				}
			}
		}
		return sc.c.st.SetLastTick(tx, s.Name, at)
	})
	if hooksDone != nil {
		if err != nil {
			hooksDone(EnqueueResult{Err: err})
		} else {
			hooksDone(EnqueueResult{Enqueued: enqueued, Created: int64(created)})
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			sc.log.Error("queue: schedule tick failed; will try again", "schedule", s.Name, "tick", t.At, "err", err)
		}
		return false
	}
	if unbuilt != nil {
		sc.log.Error("queue: schedule tick skipped: its jobs could not be built",
			errAttrs(unbuilt, "schedule", s.Name, "run_id", t.RunID)...)
	}
	if created > 0 {
		sc.log.Info("queue: schedule fired", "schedule", s.Name, "run_id", t.RunID, "jobs", created)
		sc.observe(Event{Type: EventScheduled, Schedule: s.Name, RunID: t.RunID, Jobs: created})
	}
	return true
}

// tickJobs builds the jobs of tick t, ready to insert. The schedule's Jobs
// function, and each job's Kind and MarshalJSON, are the user's code: a
// panic in them is recovered and returned. A tick whose jobs cannot be built
// (a panic, or a job Enqueue refuses) would fail the same way at every
// attempt, so the caller spends it without jobs, rather than retry it at
// every poll; the morning review lists it among the ticks that created
// nothing.
func tickJobs(c *Client, s *schedule, t Tick) (rows []newJob, err error) {
	err = userCall(func() error {
		jobs := s.Jobs(t)
		if len(jobs) == 0 {
			return nil
		}
		for i := range jobs {
			jobs[i].Options = append(jobs[i].Options[:len(jobs[i].Options):len(jobs[i].Options)],
				InRun(t.RunID), InPeriod(t.Period), IdempotencyKey(fmt.Sprintf("sheaf-tick:%s:%d", t.RunID, i)))
		}
		var err error
		rows, err = c.prepareAll(jobs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
}
