package queue

// Read-only views of a client's registry and database for operators'
// tools, such as queue/console.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/runner"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Registry returns the registry the client was built with.
func (c *ops) Registry() *Registry { return c.reg }

// Schedules returns the registered schedules, sorted by name, each with its
// Location set (UTC where none was given). Their Next method lists their
// ticks.
func (r *Registry) Schedules() []Periodic {
	scheds, _ := r.schedulesNow()
	out := make([]Periodic, 0, len(scheds))
	for _, s := range scheds {
		out = append(out, s.Periodic)
	}
	slices.SortFunc(out, func(a, b Periodic) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Ping checks that the database answers, and returns how long it took.
func (c *Client) Ping(ctx context.Context) (time.Duration, error) {
	sqlDB, err := c.db.DB()
	if err != nil {
		return 0, fmt.Errorf("queue: ping: %w", err)
	}
	start := time.Now()
	if err := sqlDB.PingContext(ctx); err != nil {
		return 0, fmt.Errorf("queue: ping: %w", err)
	}
	return time.Since(start), nil
}

// Children returns the jobs that dependency rules released when job id
// completed, in ID order: the child of each one-to-one rule of its kind,
// and the child of each many-to-one rule of its period that lists it among
// its parents. It returns ErrNotFound if there is no such job.
func (c *ops) Children(ctx context.Context, id int64) ([]JobRecord, error) {
	job, err := c.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, ru := range c.reg.rulesFor(job.Kind) {
		switch {
		case ru.Each:
			keys = append(keys, runner.ChildKey(ru.Name, runner.EachGroup(id)))
		case job.Period != nil:
			keys = append(keys, runner.ChildKey(ru.Name, runner.PeriodGroup(*job.Period)))
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	var found []JobRecord
	if err := c.st.Jobs(ctx, c.db, store.Filter{IdempotencyKeys: keys}, 0, &found); err != nil {
		return nil, fmt.Errorf("queue: children of %d: %w", id, notMigrated(err))
	}
	out := found[:0]
	for _, j := range found {
		if slices.Contains(j.ParentIDs, id) {
			out = append(out, j)
		}
	}
	return out, nil
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
}

// Runs lists runs, newest first (by when their first job was created, then
// by run ID descending). A finished run's counts are those the maintenance
// leader kept (see Tables), so a run outlives its pruned jobs; the runs
// still going are counted job by job, so its cost follows them and the
// page, not the table.
func (c *ops) Runs(ctx context.Context, q RunsQuery) ([]RunSummary, error) {
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return nil, err
	}
	if err := checkText("RunsQuery.Period", q.Period); err != nil {
		return nil, err
	}
	sq := store.RunsQuery{Period: q.Period, FirstFrom: q.FirstFrom, FirstBefore: q.FirstBefore, Limit: limit}
	if q.After != nil {
		if q.After.RunID == "" {
			return nil, invalid("RunsQuery.After has no RunID")
		}
		if err := checkText("RunsQuery.After.RunID", q.After.RunID); err != nil {
			return nil, err
		}
		sq.AfterFirst, sq.AfterRunID = q.After.FirstCreated, q.After.RunID
	}
	counts, err := store.Runs(ctx, c.st, c.db, sq)
	if err != nil {
		return nil, fmt.Errorf("queue: runs: %w", notMigrated(err))
	}
	var out []RunSummary
	for _, rc := range counts {
		if len(out) == 0 || out[len(out)-1].RunID != rc.RunID {
			out = append(out, RunSummary{RunID: rc.RunID, Counts: map[Status]int64{}, FirstCreated: rc.First})
		}
		s := &out[len(out)-1]
		s.Total += rc.N
		s.Counts[Status(rc.Status)] = rc.N
		if rc.Period.Valid && rc.Period.String > s.Period {
			s.Period = rc.Period.String
		}
		if rc.Last.After(s.LastCreated) {
			s.LastCreated = rc.Last
		}
	}
	return out, nil
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

// missedAfter is how old a due tick must be to count as missed rather than
// about to fire: a runner fires a tick within a poll interval.
const missedAfter = time.Minute

// ScheduleStates returns the registry's schedules, sorted by name, each
// with its last fired tick and the ticks it has missed, as of the client's
// clock. It reads the tick ledger: two queries for every schedule a runner
// has started, for its last fired tick and the missed ones since, each
// through the ledger's primary key.
func (c *ops) ScheduleStates(ctx context.Context) ([]ScheduleState, error) {
	rows, err := store.ScheduleRows(ctx, c.db)
	if err != nil {
		return nil, fmt.Errorf("queue: schedule states: %w", notMigrated(err))
	}
	scheds, _ := c.reg.schedulesNow()
	now := c.cfg.clock.Now()
	out := make([]ScheduleState, 0, len(scheds))
	for _, s := range scheds {
		st := ScheduleState{Periodic: s.Periodic}
		row, started := rows[s.Name]
		if !started {
			out = append(out, st)
			continue
		}
		last, err := c.ticks(ctx, store.TicksQuery{Schedules: []string{s.Name}, Outcomes: []string{store.TickFired, store.TickLate}, Limit: 1})
		if err != nil {
			return nil, fmt.Errorf("queue: schedule states: %w", err)
		}
		fired := len(last) > 0
		if fired {
			st.LastTick, st.LastRunID, st.LastJobs, st.LastOutcome = last[0].At, last[0].RunID, last[0].Jobs, last[0].Outcome
		}
		recorded, err := c.ticks(ctx, store.TicksQuery{Schedules: []string{s.Name}, Outcomes: []string{store.TickMissed},
			From: st.LastTick.Add(time.Nanosecond), Limit: 10_000})
		if err != nil {
			return nil, fmt.Errorf("queue: schedule states: %w", err)
		}
		if len(recorded) > 0 {
			st.MissedTicks, st.LatestMissed = len(recorded), recorded[0].At
		}
		switch {
		case fired:
		case !row.Started.IsZero():
			st.Started = row.Started.In(s.Location)
		case !s.next(row.LastTick.Add(-time.Nanosecond)).Equal(row.LastTick):
			st.Started = row.LastTick.In(s.Location) // where a runner of an earlier release began counting
		case len(recorded) == 0:
			// A tick fired before the ledger existed.
			st.LastTick, st.LastRunID, st.LastOutcome = row.LastTick.In(s.Location), s.tick(row.LastTick).RunID, TickFired
		}
		if latest, n := s.latest(row.LastTick, s.dueBefore(now)); n > 0 {
			st.MissedTicks += n
			st.LatestMissed = latest.In(s.Location)
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b ScheduleState) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
