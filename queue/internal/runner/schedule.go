package runner

// Scheduling: a runner's part that fires the registry's schedules.

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/run"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
	"github.com/sheaf-dev/sheaf/worker"
)

// Schedule is a registered schedule, package queue's, as the scheduler
// reads it. Schedules are told apart by identity, so that one replaced
// under the same name starts afresh on its own timetable.
type Schedule interface {
	comparable
	Timing() *Timing
}

// Timing is when a schedule fires.
type Timing struct {
	Name     string
	Cron     cron.Schedule
	Location *time.Location
	// CatchUp is how many of the latest ticks missed while no runner ran
	// fire, late, as a runner starts, oldest first; the others are
	// recorded as missed. 0 skips them all.
	CatchUp int
	// Grace is how old a tick may be when a runner first sees it and still
	// fire as due, not missed, and how late a tick may fire and still be
	// on time; 0 means DefaultGrace.
	Grace time.Duration
}

// DefaultGrace is a schedule's grace, unless it sets its own, in a runner
// that polls every poll: a minute, or two polls if longer, so that a tick
// a live runner is about to fire (its timer a little late, or a retry
// after a database error pending) is not taken for missed.
func DefaultGrace(poll time.Duration) time.Duration { return max(time.Minute, 2*poll) }

// Tick is one firing of a schedule (see queue.Tick).
type Tick struct {
	At     time.Time // in the schedule's location
	RunID  string
	Period string
}

// Tick returns the tick of the schedule at at.
func (s *Timing) Tick(at time.Time) Tick {
	local := at.In(s.Location)
	return Tick{
		At:     local,
		RunID:  s.Name + "@" + local.Format(time.RFC3339), // see TickOfRun
		Period: local.Format("2006-01-02"),
	}
}

// Next returns the schedule's first tick after t, skipping a tick whose local
// wall-clock time is not after t's: that is the hour repeated when clocks go
// back, which would otherwise make a second nightly run of the same night.
func (s *Timing) Next(t time.Time) time.Time { return NextTick(s.Cron, t.In(s.Location)) }

// NextTick returns c's first tick after t as Timing.Next does, in t's
// location.
func NextTick(c cron.Schedule, t time.Time) time.Time {
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

// Latest returns the schedule's last tick at or before now that is after
// since, and how many ticks passed in between; zero if none.
func (s *Timing) Latest(since, now time.Time) (last time.Time, n int) {
	latest, n := s.latest(since, now, 1)
	if n > 0 {
		last = latest[0]
	}
	return last, n
}

// latest returns the schedule's last keep ticks at or before now that are
// after since, oldest first, and how many ticks passed in between.
func (s *Timing) latest(since, now time.Time, keep int) (last []time.Time, n int) {
	ring := make([]time.Time, 0, min(keep, 64))
	for t := s.Next(since); !t.IsZero() && !t.After(now); t = s.Next(t) {
		if len(ring) < keep {
			ring = append(ring, t)
		} else {
			ring[n%keep] = t // over the oldest kept
		}
		n++
		if n == 1_000_000 {
			break // a minutely schedule left for two years; enough counting
		}
	}
	if n <= keep {
		return ring, n
	}
	return append(ring[n%keep:], ring[:n%keep]...), n
}

// Between returns the schedule's ticks from from, inclusive, to to,
// exclusive.
func (s *Timing) Between(from, to time.Time) []time.Time {
	var out []time.Time
	for at := s.Next(from.Add(-time.Nanosecond)); !at.IsZero() && at.Before(to); at = s.Next(at) {
		out = append(out, at)
	}
	return out
}

// OnDay returns the schedule's ticks on period, a local date (2006-01-02)
// in its location; none if period is not a date, as periods set by hand
// need not be.
func (s *Timing) OnDay(period string) []time.Time {
	day, err := time.ParseInLocation("2006-01-02", period, s.Location)
	if err != nil {
		return nil
	}
	return s.Between(day, day.AddDate(0, 0, 1))
}

// Of returns the time of the tick whose RunID is runID (see Tick), if it
// names a tick of this schedule.
func (s *Timing) Of(runID string) (time.Time, bool) {
	name, at, ok := TickOfRun(runID)
	return at, ok && name == s.Name
}

// TickOfRun returns the schedule's name and the tick's time of runID, the
// RunID of a schedule's tick (see Tick); ok is false for another run ID.
func TickOfRun(runID string) (schedule string, at time.Time, ok bool) {
	name, stamp, found := strings.Cut(runID, "@")
	at, err := time.Parse(time.RFC3339, stamp)
	return name, at, found && err == nil
}

// SchedulerConfig is what a Scheduler is built from. Every field must be
// set.
type SchedulerConfig[S Schedule] struct {
	Store store.Store
	DB    *gorm.DB
	Clock Clock
	Poll  time.Duration // how soon a tick that failed is tried again
	Log   *slog.Logger
	// Schedules returns the registry's schedules by name, and a channel
	// closed when they change.
	Schedules func() (map[string]S, <-chan struct{})
	// Create creates the jobs of tick t of s in tx, and returns how many it
	// created; unbuilt says why it created none when they could not be
	// built (the tick is then spent without jobs). ended, if not nil, is
	// called once the transaction has ended, with its error.
	Create func(ctx context.Context, tx *gorm.DB, s S, t Tick) (created int, unbuilt error, ended func(error), err error)
	// Fired is called once a tick that created jobs has committed.
	Fired func(s S, t Tick, created int)
}

// Scheduler is a runner's part that runs the registry's schedules: it
// fires each tick when the clock reaches it, in whichever runner gets there
// first. It is a Part.
type Scheduler[S Schedule] struct {
	cfg  SchedulerConfig[S]
	log  *slog.Logger
	loop run.Loop
}

// NewScheduler returns a scheduler configured by cfg; it starts nothing.
func NewScheduler[S Schedule](cfg SchedulerConfig[S]) *Scheduler[S] {
	return &Scheduler[S]{cfg: cfg, log: cfg.Log}
}

// Start starts firing the registry's schedules.
func (sc *Scheduler[S]) Start(ctx context.Context) { sc.loop.Start(ctx, sc.run) }

// Stop stops firing, waiting for a tick under way.
func (sc *Scheduler[S]) Stop() { sc.loop.Stop() }

func (sc *Scheduler[S]) run(ctx context.Context) {
	// Each schedule's next tick, as this runner sees it. Keyed by the
	// schedule itself, not its name, so that a schedule replaced under the
	// same name starts afresh on its own timetable.
	known := map[S]time.Time{}
	for ctx.Err() == nil {
		scheds, changed := sc.cfg.Schedules()
		now := sc.cfg.Clock.Now()
		wake := time.Time{}
		for _, s := range scheds {
			next, ok := known[s]
			if !ok {
				if next, ok = sc.startSchedule(ctx, s, now); !ok {
					wake = earliest(wake, now.Add(sc.cfg.Poll)) // the database failed; try again shortly
					continue
				}
			}
			for !next.IsZero() && !next.After(now) && ctx.Err() == nil {
				if !sc.fire(ctx, s, next) {
					break // the database failed; try this tick again shortly
				}
				next = s.Timing().Next(next)
			}
			known[s] = next
			due := next
			if !next.IsZero() && !next.After(now) {
				due = now.Add(sc.cfg.Poll)
			}
			wake = earliest(wake, due)
		}
		for s := range known {
			if scheds[s.Timing().Name] != s {
				delete(known, s) // unscheduled or replaced
			}
		}
		var timer <-chan time.Time
		if !wake.IsZero() {
			timer = sc.cfg.Clock.After(wake.Sub(now))
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-timer:
		}
	}
}

// earliest returns the earlier of two wake-ups, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// grace is schedule s's grace in this runner (see Timing.Grace).
func (sc *Scheduler[S]) grace(s *Timing) time.Duration {
	if s.Grace > 0 {
		return s.Grace
	}
	return DefaultGrace(sc.cfg.Poll)
}

// maxMissedRecorded caps the missed ticks one start records in the ledger,
// the latest of them, so that a minutely schedule left for months costs one
// short transaction; the log says how many were missed in all.
const maxMissedRecorded = 1000

// startSchedule brings a schedule's row up to date when a runner first sees
// it, and returns the first tick still to fire; ok is false if the database
// failed. A schedule without a row counts its ticks from now less its
// grace, so that a runner starting just after a tick fires it, as every
// later start does. Ticks older than the grace that no runner fired are
// missed: the latest CatchUp of them are left to fire (late), the others
// are recorded in the ledger as missed, in the transaction that moves the
// row's last tick past them, so that another runner starting at the same
// time finds them done.
func (sc *Scheduler[S]) startSchedule(ctx context.Context, sched S, now time.Time) (next time.Time, ok bool) {
	s := sched.Timing()
	cutoff := now.Add(-sc.grace(s))
	var from time.Time
	err := sc.cfg.Store.Tx(ctx, sc.cfg.DB, func(tx *gorm.DB) error {
		last, found, err := sc.cfg.Store.LockSchedule(tx, s.Name)
		if err != nil {
			return err
		}
		if !found {
			from = cutoff
			return store.StartSchedule(sc.cfg.Store, tx, s.Name, cutoff, now)
		}
		from = last
		// Ticks the ledger would prune at once are neither recorded nor
		// counted.
		missed, n := s.latest(maxTime(last, cutoff.Add(-store.TickKeep)), cutoff, maxMissedRecorded+s.CatchUp)
		if n == 0 {
			return nil
		}
		run := missed[max(0, len(missed)-s.CatchUp):]
		skip := missed[:len(missed)-len(run)]
		sc.log.Warn("queue: schedule missed ticks", "schedule", s.Name, "missed", n, "running", len(run), "skipping", n-len(run))
		if len(skip) == 0 {
			return nil // the loop fires them, as any tick
		}
		rows := make([]store.TickRow, 0, len(skip))
		for _, at := range skip {
			rows = append(rows, store.TickRow{Schedule: s.Name, At: at, Outcome: store.TickMissed, RecordedAt: now, RunID: s.Tick(at).RunID})
		}
		if err := store.RecordTicks(sc.cfg.Store, tx, rows); err != nil {
			return err
		}
		from = skip[len(skip)-1]
		return sc.cfg.Store.SetLastTick(tx, s.Name, from)
	})
	if err != nil {
		if ctx.Err() == nil { // a runner that stops as it starts has nothing to report
			sc.log.Error("queue: could not start schedule; will try again", "schedule", s.Name, "err", err)
		}
		return time.Time{}, false
	}
	return s.Next(from), true
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// fire creates the jobs of one tick, unless another runner did: the tick is
// claimed by moving the schedule's last tick past it under the row's lock,
// in the same transaction as the jobs and the tick's row in the ledger
// (late if it fires more than the grace after its time). It reports false if the database
// failed, so that the tick is tried again. A tick whose jobs cannot be built
// is spent without jobs (see SchedulerConfig.Create).
func (sc *Scheduler[S]) fire(ctx context.Context, sched S, at time.Time) bool {
	s := sched.Timing()
	t := s.Tick(at)
	var created int
	var unbuilt error // why the tick created nothing
	var ended func(error)
	outcome, now := store.TickFired, sc.cfg.Clock.Now()
	if now.Sub(at) > sc.grace(s) {
		outcome = store.TickLate
	}
	err := sc.cfg.Store.Tx(ctx, sc.cfg.DB, func(tx *gorm.DB) error {
		if err := sc.cfg.Store.AddSchedule(tx, s.Name, at.Add(-time.Nanosecond)); err != nil {
			return err
		}
		last, _, err := sc.cfg.Store.LockSchedule(tx, s.Name)
		if err != nil {
			return err
		}
		if !last.Before(at) {
			return nil // another runner fired it
		}
		created, unbuilt, ended, err = sc.cfg.Create(ctx, tx, sched, t)
		if err != nil {
			return err
		}
		if err := store.RecordTicks(sc.cfg.Store, tx, []store.TickRow{{
			Schedule: s.Name, At: at, Outcome: outcome, RecordedAt: now, RunID: t.RunID, Jobs: created,
		}}); err != nil {
			return err
		}
		return sc.cfg.Store.SetLastTick(tx, s.Name, at)
	})
	if ended != nil {
		ended(err)
	}
	if err != nil {
		if ctx.Err() == nil {
			sc.log.Error("queue: schedule tick failed; will try again", "schedule", s.Name, "tick", t.At, "err", err)
		}
		return false
	}
	if unbuilt != nil {
		sc.log.Error("queue: schedule tick skipped: its jobs could not be built",
			ErrAttrs(unbuilt, "schedule", s.Name, "run_id", t.RunID)...)
	}
	if created > 0 {
		sc.log.Info("queue: schedule fired", "schedule", s.Name, "run_id", t.RunID, "jobs", created)
		sc.cfg.Fired(sched, t, created)
	}
	return true
}

// ErrAttrs returns log attributes for err after attrs, with the stack when
// err is a recovered panic.
func ErrAttrs(err error, attrs ...any) []any {
	attrs = append(attrs, "err", err)
	if pe := (*worker.PanicError)(nil); errors.As(err, &pe) {
		attrs = append(attrs, "stack", string(pe.Stack))
	}
	return attrs
}
