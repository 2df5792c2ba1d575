package queue

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/calendar"
	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/operate"
	"github.com/sheaf-dev/sheaf/queue/internal/runner"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Clock tells the time for schedules and windows (WithClock); runs, leases
// and retries use the database's clock.
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
// preset, which carries the reason it refused its arguments for
// Registry.Schedule to return. The zero Spec is refused.
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

// The presets below cover the usual nightly, weekly, monthly, quarterly and
// yearly work. Each takes local wall-clock times in the schedule's Location,
// hour 0 to 23 and minute 0 to 59.

// Daily fires every day at hour:minute.
func Daily(hour, minute int) Spec { return preset(calendar.Daily(hour, minute)) }

// Weekly fires every week on day at hour:minute.
func Weekly(day time.Weekday, hour, minute int) Spec {
	return preset(calendar.Weekly(day, hour, minute))
}

// Monthly fires on day (1 to 31) of every month at hour:minute. Months
// without that day (the 31st of April, say) have no tick, as in cron; use 28
// or earlier for a tick every month.
func Monthly(day, hour, minute int) Spec {
	return preset(calendar.Monthly("Monthly", "*", day, hour, minute))
}

// Quarterly fires on day (1 to 31) of January, April, July and October at
// hour:minute; a day April lacks has no tick in April, as for Monthly.
func Quarterly(day, hour, minute int) Spec {
	return preset(calendar.Monthly("Quarterly", "1,4,7,10", day, hour, minute))
}

// Yearly fires on day of month every year at hour:minute. February 29th
// fires in leap years only.
func Yearly(month time.Month, day, hour, minute int) Spec {
	return preset(calendar.Yearly(month, day, hour, minute))
}

// preset returns the Spec of a preset's expr, and its arguments' err.
func preset(expr string, err error) Spec { return Spec{expr: expr, err: err} }

// MissedPolicy says what a schedule does about ticks that passed while no
// process was running it: its value is how many of the latest missed ticks
// fire, late, when a runner starts, oldest first (CatchUp); the others are
// recorded in the tick ledger as missed (see Client.Ticks). A tick younger
// than the schedule's grace (Periodic.Grace) when a runner starts is not
// missed: it is due, and fires then, once. Registry.Schedule refuses a
// policy below 0 or above MaxCatchUp.
type MissedPolicy int

const (
	// SkipMissed forgets missed ticks: the schedule resumes at its next
	// tick. The default: a nightly report for a night long past is rarely
	// wanted, and the morning review lists what did not run.
	SkipMissed MissedPolicy = 0
	// RunMissedOnce runs the most recent missed tick once, when a process
	// starts, however many were missed: CatchUp(1).
	RunMissedOnce MissedPolicy = 1
)

// MaxCatchUp is the most missed ticks a schedule may catch up: each is a
// transaction, fired one after the other as a runner starts.
const MaxCatchUp = 1000

// CatchUp fires the n latest missed ticks, oldest first, when a runner
// starts, and records the older ones as missed: for a daily report that
// must exist for every day, give it the days an outage may last.
// CatchUp(0) is SkipMissed and CatchUp(1) RunMissedOnce. Registry.Schedule
// refuses n below 0 or above MaxCatchUp.
func CatchUp(n int) MissedPolicy { return MissedPolicy(n) }

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

// Periodic creates jobs at the ticks of a cron expression in a time zone,
// exactly once however many runners run it. A tick in a daylight-saving
// gap is skipped, and one in the hour that repeats fires once (see
// Schedules in the package documentation).
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
	// Missed is the policy for missed ticks: SkipMissed (the default),
	// RunMissedOnce or CatchUp(n).
	Missed MissedPolicy
	// Grace is how old a tick may be when a runner starts (a new
	// schedule's first start too) and still fire as due rather than be
	// missed, and how long after its time a tick may
	// fire and still count as on time rather than late in the ledger.
	// Zero means a minute, or two poll intervals if longer (as the runner
	// is configured); otherwise 1s to 24h.
	Grace time.Duration
}

type schedule struct {
	Periodic
	timing runner.Timing
}

// Next returns the schedule's first tick after t, in its location, or an
// error for a bad Spec.
func (p Periodic) Next(t time.Time) (time.Time, error) {
	tm, err := p.timing()
	if err != nil {
		return time.Time{}, err
	}
	return tm.Next(t), nil
}

// timing is when p fires, for the runner; Location nil is UTC.
func (p Periodic) timing() (runner.Timing, error) {
	return runner.NewTiming(p.Name, p.Spec.expr, p.Spec.err, p.Location, int(p.Missed), p.Grace)
}

// Schedule registers p, or replaces the schedule of the same name; running
// runners pick the change up at once. It returns an error wrapping
// ErrInvalidOption for a bad name, spec, missed-tick policy or grace, or a
// missing Jobs function.
func (r *Registry) Schedule(p Periodic) error {
	if err := check.Name("schedule name", "schedule name", p.Name, 200); err != nil {
		return err
	}
	if p.Jobs == nil {
		return check.Invalid("schedule %q: nil Jobs function", p.Name)
	}
	tm, err := p.timing()
	if err == nil {
		err = tm.Check(p.Spec.String(), MaxCatchUp)
	}
	if err != nil {
		return err
	}
	p.Location = tm.Location
	r.r.Schedules.Put(&schedule{Periodic: p, timing: tm})
	return nil
}

// Unschedule removes the schedule called name and reports whether there was
// one. Jobs it already created are not touched.
func (r *Registry) Unschedule(name string) bool { return r.r.Schedules.Delete(name) }

// sortedSchedules returns the schedules sorted by name, and their timings.
func (r *Registry) sortedSchedules() ([]*schedule, []*runner.Timing) {
	scheds := r.r.Schedules.Sorted()
	return scheds, converted(scheds, (*schedule).Timing)
}

// timings returns the registered schedules' timetables, by name.
func (r *Registry) timings() map[string]*runner.Timing {
	scheds, _ := r.r.Schedules.Now()
	out := make(map[string]*runner.Timing, len(scheds))
	for name, s := range scheds {
		out[name] = &s.timing
	}
	return out
}

// Timing returns when the schedule fires, for the runner's scheduler.
func (s *schedule) Timing() *runner.Timing { return &s.timing }

// scheduler returns the runner's part that fires the registry's ticks.
func (c *Client) scheduler(cfg config, log *slog.Logger, observe func(Event)) *runner.Scheduler[*schedule] {
	return runner.NewScheduler(runner.SchedulerConfig[*schedule]{
		Store: c.st, DB: c.db, Clock: cfg.clock, Poll: cfg.Poll, Log: log,
		Schedules: c.reg.r.Schedules.Now,
		Create: func(ctx context.Context, tx *gorm.DB, s *schedule, tick runner.Tick) (created int, unbuilt error, ended func(error), err error) {
			var rows []newJob
			rows, unbuilt = tickJobs(c, s, Tick(operate.TickOf(s.Name, tick)))
			if len(rows) == 0 {
				return 0, unbuilt, nil, nil
			}
			var hooksDone func(EnqueueResult) // once the hooks have seen the tick's jobs
			if len(cfg.hooks) > 0 {           // the runner's: its client's and its own
				ctx, hooksDone = enqueueHooks(ctx, cfg.hooks, &EnqueueCall{Operation: opSchedule, Schedule: s.Name}, rows)
			}
			res := c.Tx(tx).inserted(ctx, rows)
			if hooksDone != nil {
				ended = func(err error) {
					if err != nil {
						res = EnqueueResult{Err: err}
					}
					hooksDone(res)
				}
			}
			return int(res.Created), unbuilt, ended, res.Err
		},
		Fired: func(s *schedule, t runner.Tick, created int) {
			observe(Event{Type: EventScheduled, Schedule: s.Name, RunID: t.RunID, Jobs: created})
		},
	})
}

// tickJobs builds the jobs of tick t; the caller spends a tick whose jobs
// cannot be built without jobs.
func tickJobs(c *Client, s *schedule, t Tick) ([]newJob, error) {
	return c.prepareStamped(func() []Params { return s.Jobs(t) },
		func(i int) string { return fmt.Sprintf("sheaf-tick:%s:%d", t.RunID, i) }, t.RunID, t.Period)
}

// The tick ledger: what became of every expected tick of a schedule.

// TickOutcome is what became of a schedule's tick, as the ledger records
// it.
type TickOutcome string

const (
	// TickFired: the tick created its jobs within its schedule's grace.
	TickFired TickOutcome = store.TickFired
	// TickLate: the tick created its jobs more than its grace after its
	// time: caught up by a runner that started late (CatchUp), or fired
	// once the database could be reached again.
	TickLate TickOutcome = store.TickLate
	// TickMissed: no runner ran at the tick, and its schedule's policy
	// skipped it.
	TickMissed TickOutcome = store.TickMissed
)

// TickRecord is a tick in the ledger. A runner writes it in the transaction
// that creates the tick's jobs, or that skips the tick; a tick that no
// runner has reached yet (every runner down) has none.
type TickRecord struct {
	// Tick is the tick: At is in its schedule's location if the schedule
	// is registered, UTC if not; RunID names its jobs' run (a missed
	// tick's would-be run).
	Tick
	Outcome TickOutcome
	// RecordedAt is when a runner recorded it, by that runner's clock.
	RecordedAt time.Time
	// Jobs is how many jobs the tick created: 0 for a missed tick, and for
	// a fired one whose Jobs function returned none or whose jobs could
	// not be built.
	Jobs int
}

// TicksQuery selects ledger rows for Client.Ticks. Zero fields select
// everything.
type TicksQuery struct {
	// Schedule keeps one schedule's ticks.
	Schedule string
	// From (inclusive) and To (exclusive) bound the ticks' times.
	From, To time.Time
	// Outcome keeps the ticks of one outcome.
	Outcome TickOutcome
	// After continues a listing after this record, the last of the
	// previous page: only its Schedule and At are read.
	After *TickRecord
	// Limit caps the records returned; 0 means 100, the most is 10,000.
	Limit int
}

// Ticks lists the ledger's ticks that q selects, newest first (then by
// schedule name, descending). The ledger keeps each schedule's ticks for
// 400 days; a runner deletes older ones as it fires the schedule. It reads
// through an index on the ticks' time.
func (c *ops) Ticks(ctx context.Context, q TicksQuery) ([]TickRecord, error) {
	page := operate.TicksPage{Schedule: q.Schedule, Outcome: string(q.Outcome), From: q.From, To: q.To, Limit: q.Limit, After: q.After != nil}
	if q.After != nil {
		page.AfterSchedule, page.AfterAt = q.After.Schedule, q.After.At
	}
	sq, err := page.Store()
	if err != nil {
		return nil, err
	}
	return c.ticks(ctx, sq)
}

// ticks reads the ledger rows q selects as records.
func (c *ops) ticks(ctx context.Context, q store.TicksQuery) ([]TickRecord, error) {
	rows, err := store.Ticks(ctx, c.st, c.db, q)
	if err != nil {
		return nil, fmt.Errorf("queue: ticks: %w", check.NotMigrated(err))
	}
	timings := c.reg.timings()
	return converted(rows, func(r store.TickRow) TickRecord {
		return TickRecord{Tick: Tick(operate.LedgerTick(timings[r.Schedule], r)), Outcome: TickOutcome(r.Outcome),
			RecordedAt: r.RecordedAt, Jobs: r.Jobs}
	}), nil
}

// Clock returns the clock the client goes by (WithClock; SystemClock{} by
// default), for tools such as queue/console that show schedules and
// windows as of the same now.
func (c *ops) Clock() Clock { return c.cfg.clock }
