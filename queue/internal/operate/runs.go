package operate

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/runner"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// RunSummary is queue.RunSummary, with its counts by status name.
type RunSummary struct {
	RunID                     string
	Period                    string
	Total                     int64
	Counts                    map[string]int64
	FirstCreated, LastCreated time.Time
}

// Runs lists the runs q selects, newest first.
func Runs(ctx context.Context, st store.Store, db *gorm.DB, q store.RunsQuery) ([]RunSummary, error) {
	counts, err := store.Runs(ctx, st, db, q)
	if err != nil {
		return nil, err
	}
	var out []RunSummary
	for _, rc := range counts {
		if len(out) == 0 || out[len(out)-1].RunID != rc.RunID {
			out = append(out, RunSummary{RunID: rc.RunID, Counts: map[string]int64{}, FirstCreated: rc.First})
		}
		s := &out[len(out)-1]
		s.Total += rc.N
		s.Counts[rc.Status] = rc.N
		if rc.Period.Valid && rc.Period.String > s.Period {
			s.Period = rc.Period.String
		}
		if rc.Last.After(s.LastCreated) {
			s.LastCreated = rc.Last
		}
	}
	return out, nil
}

// ScheduleState is what the database says of a schedule; its fields are
// queue.ScheduleState's.
type ScheduleState struct {
	LastTick, Started time.Time
	MissedTicks       int
	LatestMissed      time.Time
}

// missedAfter is how old a due tick must be to count as missed rather than
// about to fire: a runner fires a tick within a poll interval.
const missedAfter = time.Minute

// ScheduleStates returns the state of each schedule, in order, as of now.
func ScheduleStates(ctx context.Context, db *gorm.DB, scheds []*runner.Timing) ([]ScheduleState, error) {
	last, err := store.LastTicks(ctx, db)
	if err != nil {
		return nil, err
	}
	cutoff := time.Now().Add(-missedAfter)
	out := make([]ScheduleState, len(scheds))
	for i, s := range scheds {
		st := ScheduleState{LastTick: last[s.Name]}
		if !st.LastTick.IsZero() {
			st.LatestMissed, st.MissedTicks = s.Latest(st.LastTick, cutoff)
			if !s.Next(st.LastTick.Add(-time.Nanosecond)).Equal(st.LastTick) {
				// Off the timetable: not a tick but where a runner that
				// started the schedule began counting from.
				st.Started, st.LastTick = st.LastTick, time.Time{}
			}
		}
		out[i] = st
	}
	return out, nil
}
