package operate

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/runner"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// RunSummary is queue.RunSummary field for field; S is queue.Status.
type RunSummary[S ~string] struct {
	RunID                     string
	Period                    string
	Total                     int64
	Counts                    map[S]int64
	FirstCreated, LastCreated time.Time
	LastFinished              time.Time
}

// Runs lists the runs q selects, newest first.
func Runs[S ~string](ctx context.Context, st store.Store, db *gorm.DB, q store.RunsQuery) ([]RunSummary[S], error) {
	counts, err := store.Runs(ctx, st, db, q)
	if err != nil {
		return nil, check.Failed(ctx, "runs", err)
	}
	var out []RunSummary[S]
	for _, rc := range counts {
		if len(out) == 0 || out[len(out)-1].RunID != rc.RunID {
			out = append(out, RunSummary[S]{RunID: rc.RunID, Counts: map[S]int64{}, FirstCreated: rc.First})
		}
		s := &out[len(out)-1]
		s.Total += rc.N
		s.Counts[S(rc.Status)] = rc.N
		if rc.Period.Valid && rc.Period.String > s.Period {
			s.Period = rc.Period.String
		}
		if rc.Last.After(s.LastCreated) {
			s.LastCreated = rc.Last
		}
		if rc.Finished.After(s.LastFinished) {
			s.LastFinished = rc.Finished
		}
	}
	return out, nil
}

// ScheduleState is what the database says of a schedule; its fields are
// queue.ScheduleState's, its times in the schedule's location.
type ScheduleState struct {
	LastTick     time.Time
	LastRunID    string
	LastJobs     int
	LastOutcome  string
	Started      time.Time
	MissedTicks  int
	LatestMissed time.Time
}

// missedAfter is how old a due tick must be to count as missed rather than
// about to fire: a runner fires a tick within a poll interval.
const missedAfter = time.Minute

// DueBefore is the time before which a tick of s counts as missed if no
// runner recorded it, as of now: its grace ago, and at least a minute ago,
// as a runner that polls slowly may be a little late.
func DueBefore(s *runner.Timing, now time.Time) time.Time {
	return now.Add(-max(s.Grace, missedAfter))
}

// ScheduleStates returns the state of each schedule, in order, as of now,
// from the tick ledger: two reads through its primary key for every
// schedule a runner has started.
func ScheduleStates(ctx context.Context, st store.Store, db *gorm.DB, scheds []*runner.Timing, now time.Time) ([]ScheduleState, error) {
	rows, err := store.ScheduleRows(ctx, db)
	if err != nil {
		return nil, err
	}
	out := make([]ScheduleState, len(scheds))
	for i, s := range scheds {
		row, started := rows[s.Name]
		if !started {
			continue
		}
		ss := &out[i]
		sum, err := store.SummarizeTicks(ctx, st, db, s.Name)
		if err != nil {
			return nil, err
		}
		fired := sum.Last != nil
		if fired {
			ss.LastTick, ss.LastRunID, ss.LastJobs, ss.LastOutcome = sum.Last.At.In(s.Location), sum.Last.RunID, sum.Last.Jobs, sum.Last.Outcome
		}
		if sum.Missed > 0 {
			ss.MissedTicks, ss.LatestMissed = sum.Missed, sum.LatestMissed.In(s.Location)
		}
		switch {
		case fired:
		case !row.Started.IsZero():
			ss.Started = row.Started.In(s.Location)
		case !s.Next(row.LastTick.Add(-time.Nanosecond)).Equal(row.LastTick):
			ss.Started = row.LastTick.In(s.Location) // where a runner of an earlier release began counting
		case sum.Missed == 0:
			// A tick fired before the ledger existed.
			ss.LastTick, ss.LastRunID, ss.LastOutcome = row.LastTick.In(s.Location), s.Tick(row.LastTick).RunID, store.TickFired
		}
		if latest, n := s.Latest(row.LastTick, DueBefore(s, now)); n > 0 {
			ss.MissedTicks += n
			ss.LatestMissed = latest.In(s.Location)
		}
	}
	return out, nil
}
