package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/operate"
	"github.com/sheaf-dev/sheaf/queue/internal/runner"
)

// Registry returns the registry the client was built with.
func (c *ops) Registry() *Registry { return c.reg }

// Schedules returns the registered schedules, sorted by name, each with its
// Location set (UTC where none was given).
func (r *Registry) Schedules() []Periodic {
	scheds, _ := r.sortedSchedules()
	return converted(scheds, func(s *schedule) Periodic { return s.Periodic })
}

// Ping checks that the database answers, and returns how long it took.
func (c *Client) Ping(ctx context.Context) (time.Duration, error) { return runner.Ping(ctx, c.db) }

// Children returns the jobs that dependency rules released when job id
// completed, in ID order: the child of each one-to-one rule of its kind,
// and the child of each many-to-one rule of its period that lists it among
// its parents. It returns ErrNotFound if there is no such job.
func (c *ops) Children(ctx context.Context, id int64) ([]JobRecord, error) {
	return c.jobs().ChildrenOf(ctx, id, func(kind string) []runner.Dependency { return rulesOf(c.reg.rulesFor(kind)) })
}

// RunsQuery selects runs for Client.Runs. Zero fields select everything.
type RunsQuery struct {
	// Period keeps the runs with jobs of that period.
	Period string
	// FirstFrom (inclusive) and FirstBefore (exclusive) bound when each
	// run's first job was created.
	FirstFrom, FirstBefore time.Time
	// After continues a listing after this run, the last of the previous
	// page: only its RunID and FirstCreated are read.
	After *RunSummary
	// Limit caps the runs returned; 0 means 100, the most is 10,000.
	Limit int
}

// RunSummary is one run: the jobs that share a run ID, as a schedule's tick
// and the jobs its jobs released do.
type RunSummary struct {
	RunID string
	// Period is the period of the run's jobs, if they have one.
	Period string
	// Total and Counts count the run's jobs, by status.
	Total  int64
	Counts map[Status]int64
	// FirstCreated and LastCreated are when the run's first and latest
	// jobs were created.
	FirstCreated, LastCreated time.Time
	// LastFinished is when the run's latest job to finish (complete, fail
	// for good or be cancelled) did; zero if none has. Once no job of the
	// run is queued or running, it is the run's finish, which outlives the
	// jobs that retention prunes (it is kept with the run's counts).
	LastFinished time.Time
}

// Runs lists runs, newest first (by when their first job was created, then
// by run ID descending). A finished run's counts are those the maintenance
// leader kept (see Tables), so a run outlives its pruned jobs; the runs
// still going are counted job by job, so its cost follows them and the
// page, not the table.
func (c *ops) Runs(ctx context.Context, q RunsQuery) ([]RunSummary, error) {
	page := operate.RunsPage{Period: q.Period, FirstFrom: q.FirstFrom, FirstBefore: q.FirstBefore, Limit: q.Limit, After: q.After != nil}
	if q.After != nil {
		page.AfterRunID, page.AfterFirst = q.After.RunID, q.After.FirstCreated
	}
	sq, err := page.Store()
	if err != nil {
		return nil, err
	}
	runs, err := operate.Runs[Status](ctx, c.st, c.db, sq)
	return converted(runs, func(r operate.RunSummary[Status]) RunSummary { return RunSummary(r) }), err
}

// ScheduleState is a registered schedule with what the database says of
// it.
type ScheduleState struct {
	Periodic
	// LastTick is the latest tick a runner fired, as the tick ledger
	// records it; zero if none has fired. LastRunID is its run, LastJobs
	// the jobs it created, and LastOutcome TickFired or TickLate.
	LastTick    time.Time
	LastRunID   string
	LastJobs    int
	LastOutcome TickOutcome
	// Started is, for a schedule a runner has started but that has not
	// fired a tick yet, when it was started: it waits for its first tick
	// after that, less its grace. Zero otherwise.
	Started time.Time
	// MissedTicks counts the ticks after LastTick that did not fire: those
	// the ledger records as missed, and those due more than the grace (at
	// least a minute) ago that no runner has reached (none runs, or none
	// can reach the database; a runner that starts applies the schedule's
	// Missed policy to them). LatestMissed is the latest of them.
	MissedTicks  int
	LatestMissed time.Time
}

// ScheduleStates returns the registry's schedules, sorted by name, each
// with its last fired tick and the ticks it has missed, as of the client's
// clock. It reads the tick ledger: two queries for every schedule a runner
// has started, for its last fired tick and the missed ones since, each
// through the ledger's primary key.
func (c *ops) ScheduleStates(ctx context.Context) ([]ScheduleState, error) {
	scheds, timings := c.reg.sortedSchedules()
	states, err := operate.ScheduleStates(ctx, c.st, c.db, timings, c.cfg.clock.Now())
	if err != nil {
		return nil, fmt.Errorf("queue: schedule states: %w", check.NotMigrated(err))
	}
	out := make([]ScheduleState, len(scheds))
	for i, st := range states {
		out[i] = ScheduleState{Periodic: scheds[i].Periodic, LastTick: st.LastTick, LastRunID: st.LastRunID, LastJobs: st.LastJobs,
			LastOutcome: TickOutcome(st.LastOutcome), Started: st.Started, MissedTicks: st.MissedTicks, LatestMissed: st.LatestMissed}
	}
	return out, nil
}

// jobs reads the client's job records for package operate.
func (c *ops) jobs() operate.Jobs[JobRecord] {
	return operate.Jobs[JobRecord]{Store: c.st, DB: c.db, View: viewOf,
		Errs: operate.Errors{NotFound: ErrNotFound, WrongStatus: ErrWrongStatus, Invalid: ErrInvalidOption}}
}

// viewOf is what package operate reads of r.
func viewOf(r *JobRecord) operate.Job {
	return operate.Job{ID: r.ID, Kind: r.Kind, Status: string(r.Status), Attempts: r.Attempts, Claims: r.Claims,
		Period: r.Period, LockedBy: r.LockedBy, StartedAt: r.StartedAt, CompletedAt: r.CompletedAt, ParentIDs: r.ParentIDs}
}

// converted returns f of each of in; nil for nil.
func converted[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return nil
	}
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}
