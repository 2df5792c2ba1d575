package batch_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/cleanup"
)

// runtime.Goexit in user code (t.FailNow and require call it) is a failure
// like a panic, wherever it happens: batch A gets exactly one outcome, never
// Completed for a failed step, its items are all counted, and batch B, queued
// behind it on the only worker, still completes. synctest turns a worker that
// never comes back into a deadlock report rather than a hang.
func TestGoexitInUserCode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		exits    []string // calls of the recorder or strategy that end their goroutine
		failAt   int      // A's sub-batch whose Process returns an error; 0 for none
		observer bool     // the observer ends its goroutine on A's outcome
		logger   bool     // the log handler ends its goroutine on every record about A
		status   batch.Status
		seq      int
		op       string // the step whose Goexit failed the batch; "" when it failed otherwise
		cleanErr bool   // the cleanup ended its goroutine
	}{
		{name: "process, sub-batch 1 of 2", exits: []string{"process A 1 n=5"}, status: batch.Failed, seq: cleanup.SeqUnknown, op: "process"},
		{name: "process, sub-batch 2 of 2", exits: []string{"process A 2 n=5"}, status: batch.Failed, seq: cleanup.SeqUnknown, op: "process"},
		{name: "before hook", exits: []string{"before A"}, status: batch.Failed, seq: cleanup.SeqUnknown, op: "before"},
		{name: "after hook", exits: []string{"after A"}, status: batch.Failed, seq: cleanup.SeqUnknown, op: "after"},
		{name: "mark complete", exits: []string{"complete A"}, status: batch.Failed, seq: cleanup.SeqUnknown, op: "complete"},
		{name: "cleanup", failAt: 2, exits: []string{"cleanup A 2"}, status: batch.Failed, seq: 2, cleanErr: true},
		{name: "observer", observer: true, status: batch.Completed},
		{name: "logger", failAt: 2, logger: true, status: batch.Failed, seq: 2},
		{
			name: "process, then cleanup, observer and logger", exits: []string{"process A 1 n=5", "cleanup A -1"},
			observer: true, logger: true, status: batch.Failed, seq: cleanup.SeqUnknown, op: "process", cleanErr: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				rec := newRecorder()
				rec.exits = tc.exits
				if tc.failAt > 0 {
					rec.failAt["A"] = tc.failAt
				}
				strat := &strategy{failComplete: map[string]bool{}, exits: tc.exits}
				outs := &outcomes{byID: map[string][]batch.Outcome{}}
				observe := outs.add
				if tc.observer {
					observe = func(o batch.Outcome) {
						outs.add(o)
						if o.BatchID == "A" {
							runtime.Goexit()
						}
					}
				}
				var mu sync.Mutex
				var logs []byte
				logger := slogJSON(&mu, &logs)
				if tc.logger {
					logger = slog.New(exitingHandler{batchID: "A"})
				}
				c, err := batch.NewCoordinator[order](rec, batch.WithLogger(logger), batch.WithCleanup(strat),
					batch.WithObserver(observe), batch.WithMaxBatchSize(5), batch.WithWorkers(1))
				require.NoError(t, err)
				ctx := context.Background()
				require.NoError(t, c.Start(ctx))
				require.NoError(t, c.SendMany(ctx, "A", orders(0, 10)))
				require.NoError(t, c.Send(ctx, batch.End[order]("A")))
				require.NoError(t, c.SendMany(ctx, "B", orders(0, 3)))
				require.NoError(t, c.Send(ctx, batch.End[order]("B")))
				require.NoError(t, c.Shutdown(ctx))

				a := outs.one(t, "A")
				require.Equal(t, tc.status, a.Status)
				require.Equal(t, tc.seq, a.Seq)
				if tc.op != "" {
					var pe *batch.ProcessError
					require.ErrorAs(t, a.Err, &pe)
					require.Equal(t, tc.op, pe.Op)
					var panicErr *batch.PanicError
					require.ErrorAs(t, a.Err, &panicErr, "reported like a panic")
					require.ErrorIs(t, a.Err, batch.ErrGoexit)
					require.Contains(t, string(panicErr.Stack), "helpers_test.go", "with the stack of the call")
				}
				if tc.cleanErr {
					require.ErrorIs(t, a.CleanupErr, batch.ErrGoexit)
				} else {
					require.NoError(t, a.CleanupErr)
				}
				if tc.status == batch.Completed {
					require.Equal(t, int64(10), a.Items)
				} else {
					require.Contains(t, strat.Calls(), fmt.Sprintf("cleanup A %d", tc.seq))
					if tc.op != "complete" {
						require.NotContains(t, strat.Calls(), "complete A")
					}
				}
				require.Equal(t, batch.Completed, outs.one(t, "B").Status, "the worker carries on")
				require.Equal(t, orders(0, 3), rec.Items("B"))

				if !tc.logger {
					mu.Lock()
					lines := strings.Split(string(logs), "\n")
					mu.Unlock()
					require.True(t, slices.ContainsFunc(lines, func(l string) bool {
						return strings.Contains(l, `"msg":"batch: `+tc.status.String()+`"`) && strings.Contains(l, `"batch_id":"A"`)
					}), "A's outcome is logged")
					require.False(t, slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "internal panic") }),
						"a Goexit in user code is the batch's failure, not the engine's")
				}

				s := c.Stats()
				require.Equal(t, int64(13), s.ItemsReceived)
				require.Equal(t, s.ItemsReceived, s.ItemsProcessed+s.ItemsDiscarded)
				require.Zero(t, s.InFlight)
				require.Zero(t, s.Queued)
			})
		})
	}
}

// exitingHandler is a log handler that ends its goroutine with runtime.Goexit
// on every record about one batch ID.
type exitingHandler struct{ batchID string }

func (exitingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h exitingHandler) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "batch_id" && a.Value.String() == h.batchID {
			runtime.Goexit()
		}
		return true
	})
	return nil
}

func (h exitingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h exitingHandler) WithGroup(string) slog.Handler      { return h }
