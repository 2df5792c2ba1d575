package maintain_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue/internal/maintain"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// slowPrunes is a store whose every day and hour is rolled up and whose
// prune batches take took each, by the clock of the test's bubble; the
// batches-th is the pass's last.
type slowPrunes struct {
	store.Store
	took    time.Duration
	batches int
	calls   int
}

func (*slowPrunes) FinalBefore(context.Context) (string, error) { return "2030-01-01", nil }

func (*slowPrunes) HoursFinal(context.Context) (time.Time, time.Time, bool, error) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	return at, at, true, nil
}

func (s *slowPrunes) Prune(context.Context, store.Prune) (store.PruneResult, error) {
	time.Sleep(s.took)
	s.calls++
	return store.PruneResult{Next: store.Place{At: time.Unix(int64(s.calls), 0), ID: int64(s.calls)}, Done: s.calls == s.batches}, nil
}

// The pause after a batch is PrunePause, or PruneYield times the batch's
// time if that is longer: a slow server is pruned at most a quarter of the
// time. RunNow goes on through such pauses to the pass's end.
func TestPrunePausesInProportionToItsBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		keep := func() []maintain.Keep { return []maintain.Keep{{Status: "COMPLETED", For: time.Hour}} }
		fast := &slowPrunes{took: 10 * time.Millisecond, batches: 100}
		next, err := (&maintain.Prune{Store: fast, Rules: keep}).Run(ctx)
		require.NoError(t, err)
		require.Equal(t, maintain.PrunePause, next, "a quick batch: the least pause")

		slow := &slowPrunes{took: 100 * time.Millisecond, batches: 3}
		p := &maintain.Prune{Store: slow, Rules: keep}
		next, err = p.Run(ctx)
		require.NoError(t, err)
		require.Equal(t, maintain.PruneYield*slow.took, next, "a slow one: in proportion")

		slow.calls = 0
		began := time.Now()
		_, err = maintain.RunNow(ctx, []maintain.Task{&maintain.Prune{Store: slow, Rules: keep}})
		require.NoError(t, err)
		require.Equal(t, 3, slow.calls, "to the pass's end")
		require.Equal(t, 3*slow.took+2*maintain.PruneYield*slow.took, time.Since(began), "three batches, two pauses")
	})
}

// scriptedPrunes is a store whose every day and hour is rolled up, whose
// prune batches return results in turn, and which records what each was
// asked.
type scriptedPrunes struct {
	slowPrunes
	results []store.PruneResult
	asked   []store.Prune
}

func (s *scriptedPrunes) Prune(_ context.Context, p store.Prune) (store.PruneResult, error) {
	s.asked = append(s.asked, p)
	res := s.results[0]
	s.results = s.results[1:]
	return res, nil
}

// A pass hands the runs and periods its batches found held to the batches
// after them, and the periods found due for PeriodRecheck; a new pass
// starts with none.
func TestPruneHandsHeldAndDueGroupsOn(t *testing.T) {
	next := store.Place{At: time.Unix(1, 0), ID: 1}
	s := &scriptedPrunes{results: []store.PruneResult{
		{Next: next, HeldRuns: []string{"r1"}, HeldPeriods: []string{"p1"}, DuePeriods: []string{"d1"}},
		{Next: next, HeldPeriods: []string{"p2"}, DuePeriods: []string{"d2"}},
		{Done: true},
		{Next: next},
	}}
	now := time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC)
	p := &maintain.Prune{Store: s, Rules: func() []maintain.Keep { return []maintain.Keep{{Status: "COMPLETED", For: time.Hour}} },
		Now: func() time.Time { return now }}
	for _, step := range []time.Duration{0, maintain.PeriodRecheck - time.Second, 2 * time.Second, 0} {
		now = now.Add(step)
		_, err := p.Run(context.Background())
		require.NoError(t, err)
	}
	type asked struct{ runs, periods, due []string }
	var got []asked
	for _, a := range s.asked {
		got = append(got, asked{a.HeldRuns, a.HeldPeriods, a.DuePeriods})
	}
	require.Equal(t, []asked{
		{},
		{[]string{"r1"}, []string{"p1"}, []string{"d1"}},
		{[]string{"r1"}, []string{"p1", "p2"}, []string{"d2"}}, // d1 found more than PeriodRecheck ago
		{},
	}, got)
}
