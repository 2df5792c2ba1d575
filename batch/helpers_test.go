package batch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

type order struct {
	ID     int
	Amount int
}

func orders(from, n int) []order {
	out := make([]order, n)
	for i := range out {
		out[i] = order{ID: from + i, Amount: 10}
	}
	return out
}

var errConstraint = errors.New("duplicate key value violates unique constraint")

// recorder is a processor with hooks that records every call, checks that no
// batch ID is processed on two workers at once, and fails or panics on
// demand.
type recorder struct {
	mu         sync.Mutex
	events     []string           // in call order
	items      map[string][]order // processed items by batch ID
	active     map[string]bool
	overlap    bool
	failAt     map[string]int // Process fails at this sequence
	panicAt    map[string]int
	failBefore map[string]bool
	failAfter  map[string]bool
	exits      []string // events whose call then ends its goroutine with runtime.Goexit
	// process, when set, runs inside Process after the bookkeeping.
	process func(ctx context.Context, b batch.Batch[order]) error
}

func newRecorder() *recorder {
	return &recorder{
		items: map[string][]order{}, active: map[string]bool{},
		failAt: map[string]int{}, panicAt: map[string]int{},
		failBefore: map[string]bool{}, failAfter: map[string]bool{},
	}
}

func (r *recorder) record(format string, args ...any) {
	ev := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.events = append(r.events, ev)
	exit := slices.Contains(r.exits, ev)
	r.mu.Unlock()
	if exit {
		runtime.Goexit() // as t.FailNow and require do
	}
}

func (r *recorder) BeforeBatch(_ context.Context, id string) error {
	r.record("before %s", id)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failBefore[id] {
		return errors.New("before hook refused " + id)
	}
	return nil
}

func (r *recorder) AfterBatch(_ context.Context, id string) error {
	r.record("after %s", id)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failAfter[id] {
		return errors.New("after hook refused " + id)
	}
	return nil
}

func (r *recorder) Process(ctx context.Context, b batch.Batch[order]) error {
	r.mu.Lock()
	if r.active[b.ID] {
		r.overlap = true
	}
	r.active[b.ID] = true
	failAt, panicAt, process := r.failAt[b.ID], r.panicAt[b.ID], r.process
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.active[b.ID] = false
		r.mu.Unlock()
	}()
	r.record("process %s %d n=%d", b.ID, b.Seq, len(b.Items))
	if b.Seq == panicAt {
		panic("processor exploded on " + b.ID)
	}
	if b.Seq == failAt {
		return errConstraint
	}
	if process != nil {
		if err := process(ctx, b); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.items[b.ID] = append(r.items[b.ID], b.Items...)
	r.mu.Unlock()
	return nil
}

func (r *recorder) Events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func (r *recorder) Items(id string) []order {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]order(nil), r.items[id]...)
}

// strategy is a cleanup strategy that records its calls.
type strategy struct {
	mu           sync.Mutex
	calls        []string
	ctxErrs      []error // ctx.Err() seen by each call
	failCleanup  bool
	panicCleanup bool
	failComplete map[string]bool
	exits        []string // calls that then end their goroutine with runtime.Goexit
}

func (s *strategy) Cleanup(ctx context.Context, id string, seq int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.called(fmt.Sprintf("cleanup %s %d", id, seq))
	s.ctxErrs = append(s.ctxErrs, ctx.Err())
	if s.panicCleanup {
		panic("cleanup exploded")
	}
	if s.failCleanup {
		return errors.New("cleanup: connection refused")
	}
	return nil
}

func (s *strategy) MarkComplete(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.called("complete " + id)
	if s.failComplete[id] {
		return errors.New("complete refused")
	}
	return nil
}

// called records a call; s.mu is held, and released by the caller's defer
// also when the call ends its goroutine.
func (s *strategy) called(call string) {
	s.calls = append(s.calls, call)
	if slices.Contains(s.exits, call) {
		runtime.Goexit()
	}
}

func (s *strategy) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// outcomes collects what the observer receives.
type outcomes struct {
	mu   sync.Mutex
	byID map[string][]batch.Outcome
	all  []batch.Outcome
}

func (o *outcomes) add(out batch.Outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.byID[out.BatchID] = append(o.byID[out.BatchID], out)
	o.all = append(o.all, out)
}

// one returns the single outcome of id, failing if there is not exactly one.
func (o *outcomes) one(t *testing.T, id string) batch.Outcome {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	require.Len(t, o.byID[id], 1, "batch %s must have exactly one outcome", id)
	return o.byID[id][0]
}

func (o *outcomes) of(id string) []batch.Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]batch.Outcome(nil), o.byID[id]...)
}

func (o *outcomes) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.all)
}

// bundle is what setup returns.
type bundle struct {
	c     *batch.Coordinator[order]
	rec   *recorder
	strat *strategy
	outs  *outcomes
}

func quiet() batch.Option { return batch.WithLogger(slog.New(slog.DiscardHandler)) }

// setup builds and starts a coordinator over a recorder, a recording cleanup
// strategy and an outcome collector. configure may set up the recorder before
// anything runs. The coordinator is shut down when the test ends.
func setup(t *testing.T, configure func(*recorder, *strategy), opts ...batch.Option) *bundle {
	t.Helper()
	b := &bundle{rec: newRecorder(), strat: &strategy{failComplete: map[string]bool{}}, outs: &outcomes{byID: map[string][]batch.Outcome{}}}
	if configure != nil {
		configure(b.rec, b.strat)
	}
	all := append([]batch.Option{quiet(), batch.WithCleanup(b.strat), batch.WithObserver(b.outs.add)}, opts...)
	c, err := batch.NewCoordinator[order](b.rec, all...)
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))
	b.c = c
	t.Cleanup(func() { require.NoError(t, c.Shutdown(context.Background())) })
	return b
}

// send sends items for id one by one and then, if end, the end-of-batch.
func (b *bundle) send(t *testing.T, id string, items []order, end bool) {
	t.Helper()
	for _, it := range items {
		require.NoError(t, b.c.Send(context.Background(), batch.Data(id, it)))
	}
	if end {
		require.NoError(t, b.c.Send(context.Background(), batch.End[order](id)))
	}
}

// shutdown shuts down and requires success: afterwards every outcome has
// been delivered.
func (b *bundle) shutdown(t *testing.T) {
	t.Helper()
	require.NoError(t, b.c.Shutdown(context.Background()))
}

// slogJSON returns a JSON logger at Debug level writing into *buf.
func slogJSON(mu *sync.Mutex, buf *[]byte) *slog.Logger {
	return slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		*buf = append(*buf, p...)
		return len(p), nil
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// untilCancelled returns a recorder setup whose Process, for every batch,
// closes started and then waits for its context to end, returning ret(ctx):
// a write that is in flight when a hard stop comes.
func untilCancelled(started chan struct{}, ret func(ctx context.Context) error) func(*recorder, *strategy) {
	return func(r *recorder, _ *strategy) {
		r.process = func(ctx context.Context, _ batch.Batch[order]) error {
			close(started)
			<-ctx.Done()
			return ret(ctx)
		}
	}
}
