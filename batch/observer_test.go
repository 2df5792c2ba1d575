package batch_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/cleanup"
)

// observed runs items through a one-worker coordinator whose processor
// fails sub-batch failAt of batch "b" (0: never), and returns what the
// sub-batch and outcome observers saw, in the order they saw it.
func observed(t *testing.T, items, failAt int, extra ...batch.Option) (events []string, subs []batch.SubBatchResult, outs []batch.Outcome) {
	t.Helper()
	var mu sync.Mutex
	proc := batch.ProcessorFunc[int](func(ctx context.Context, b batch.Batch[int]) error {
		if b.Seq == failAt {
			return errors.New("boom")
		}
		return nil
	})
	opts := append([]batch.Option{
		batch.WithMaxBatchSize(2), batch.WithWorkers(1),
		batch.WithLogger(slog.New(slog.DiscardHandler)),
		batch.WithCleanup(cleanup.Func(func(context.Context, string, int) error { return nil })),
		batch.Options(
			batch.WithSubBatchObserver(func(r batch.SubBatchResult) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, "sub")
				subs = append(subs, r)
			}),
			batch.WithObserver(func(o batch.Outcome) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, "outcome")
				outs = append(outs, o)
			}),
		),
	}, extra...)
	c, err := batch.NewCoordinator(proc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range items {
		if err := c.Send(ctx, batch.Data("b", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Send(ctx, batch.End[int]("b")); err != nil {
		t.Fatal(err)
	}
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	return events, subs, outs
}

func TestSubBatchObserverCompleted(t *testing.T) {
	events, subs, outs := observed(t, 5, 0)
	if want := []string{"sub", "sub", "sub", "outcome"}; !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}
	for i, r := range subs {
		wantItems := 2
		if i == 2 {
			wantItems = 1
		}
		if r.BatchID != "b" || r.Seq != i+1 || r.Items != wantItems || r.Err != nil || r.Duration < 0 {
			t.Errorf("sub-batch %d: %+v", i, r)
		}
	}
	if o := outs[0]; o.Status != batch.Completed || o.CleanedUp {
		t.Errorf("outcome %+v", o)
	}
}

func TestSubBatchObserverFailed(t *testing.T) {
	events, subs, outs := observed(t, 5, 2)
	if want := []string{"sub", "sub", "outcome"}; !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}
	if r := subs[1]; r.Seq != 2 || r.Items != 2 || r.Err == nil || r.Err.Error() != "boom" {
		t.Errorf("failed sub-batch %+v", r)
	}
	if o := outs[0]; o.Status != batch.Failed || !o.CleanedUp || o.CleanupErr != nil || o.Seq != 2 {
		t.Errorf("outcome %+v", o)
	}
}

// Every observer runs, in order, even after one panics or calls Goexit, and
// the batch still gets its outcome.
func TestObserversAddUpAndSurvive(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	note := func(s string) { mu.Lock(); defer mu.Unlock(); calls = append(calls, s) }
	_, _, outs := observed(t, 1, 1,
		batch.WithSubBatchObserver(func(batch.SubBatchResult) { note("sub-goexit"); runtime.Goexit() }),
		batch.WithSubBatchObserver(func(batch.SubBatchResult) { note("sub-after") }),
		batch.WithObserver(func(batch.Outcome) { note("out-panic"); panic("observer") }),
		batch.WithObserver(nil),
		batch.WithObserver(func(batch.Outcome) { note("out-after") }),
	)
	if want := []string{"sub-goexit", "sub-after", "out-panic", "out-after"}; !slices.Equal(calls, want) {
		t.Errorf("calls %v, want %v", calls, want)
	}
	if len(outs) != 1 || outs[0].Status != batch.Failed {
		t.Errorf("outcomes %+v", outs)
	}
}

func TestOptionsRefusesNil(t *testing.T) {
	_, err := batch.NewCoordinator(batch.ProcessorFunc[int](func(context.Context, batch.Batch[int]) error { return nil }),
		batch.Options(batch.WithWorkers(1), nil))
	if !errors.Is(err, batch.ErrInvalidOption) {
		t.Errorf("err %v, want ErrInvalidOption", err)
	}
}
