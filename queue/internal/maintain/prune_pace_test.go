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
