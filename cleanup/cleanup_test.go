package cleanup_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/cleanup"
	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

// recorder is a strategy that logs its calls and fails on demand.
type recorder struct {
	name  string
	log   *[]string
	fails bool
}

func (r recorder) Cleanup(_ context.Context, id string, seq int) error {
	*r.log = append(*r.log, fmt.Sprintf("%s.cleanup(%s,%d)", r.name, id, seq))
	if r.fails {
		return errors.New(r.name + " cleanup failed")
	}
	return nil
}

func (r recorder) MarkComplete(_ context.Context, id string) error {
	*r.log = append(*r.log, fmt.Sprintf("%s.complete(%s)", r.name, id))
	if r.fails {
		return errors.New(r.name + " complete failed")
	}
	return nil
}

func TestNone(t *testing.T) {
	t.Parallel()
	s := cleanup.None()
	require.NoError(t, s.Cleanup(context.Background(), "A", 2))
	require.NoError(t, s.MarkComplete(context.Background(), "A"))
}

func TestFunc(t *testing.T) {
	t.Parallel()
	var got []string
	s := cleanup.Func(func(_ context.Context, id string, seq int) error {
		got = append(got, fmt.Sprint(id, seq))
		if seq == cleanup.SeqUnknown {
			return errors.New("unknown")
		}
		return nil
	})
	require.NoError(t, s.Cleanup(context.Background(), "A", 3))
	require.EqualError(t, s.Cleanup(context.Background(), "B", cleanup.SeqUnknown), "unknown")
	require.NoError(t, s.MarkComplete(context.Background(), "A"))
	require.Equal(t, []string{"A3", "B-1"}, got, "MarkComplete does not call the function")
}

func TestChainRunsEveryStrategyAndJoinsErrors(t *testing.T) {
	t.Parallel()
	var log []string
	s := cleanup.Chain(
		recorder{name: "a", log: &log},
		nil,
		recorder{name: "b", log: &log, fails: true},
		recorder{name: "c", log: &log},
	)
	err := s.Cleanup(context.Background(), "X", 1)
	require.EqualError(t, err, "b cleanup failed")
	err = s.MarkComplete(context.Background(), "X")
	require.EqualError(t, err, "b complete failed")
	require.Equal(t, []string{
		"a.cleanup(X,1)", "b.cleanup(X,1)", "c.cleanup(X,1)",
		"a.complete(X)", "b.complete(X)", "c.complete(X)",
	}, log, "a failure does not stop later strategies")

	log = nil
	both := cleanup.Chain(recorder{name: "a", log: &log, fails: true}, recorder{name: "b", log: &log, fails: true})
	err = both.Cleanup(context.Background(), "Y", 0)
	require.ErrorContains(t, err, "a cleanup failed")
	require.ErrorContains(t, err, "b cleanup failed")
}

// panicky is a strategy whose methods panic.
type panicky struct{}

func (panicky) Cleanup(context.Context, string, int) error { panic("cleanup exploded") }
func (panicky) MarkComplete(context.Context, string) error { panic("complete exploded") }

func TestChainRunsPastAPanic(t *testing.T) {
	t.Parallel()
	var log []string
	s := cleanup.Chain(panicky{}, recorder{name: "b", log: &log})
	err := s.Cleanup(context.Background(), "X", 2)
	var pe *worker.PanicError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "cleanup exploded", pe.Value)
	err = s.MarkComplete(context.Background(), "X")
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "complete exploded", pe.Value)
	require.Equal(t, []string{"b.cleanup(X,2)", "b.complete(X)"}, log, "the strategy after the panic still runs")
}

func TestEmptyChainDoesNothing(t *testing.T) {
	t.Parallel()
	require.NoError(t, cleanup.Chain().Cleanup(context.Background(), "A", 1))
	require.NoError(t, cleanup.Chain(nil, nil).MarkComplete(context.Background(), "A"))
}

// exiting is a strategy whose methods end their goroutine with runtime.Goexit,
// as t.FailNow does.
type exiting struct{}

func (exiting) Cleanup(context.Context, string, int) error { runtime.Goexit(); return nil }
func (exiting) MarkComplete(context.Context, string) error { runtime.Goexit(); return nil }

// A Goexit ends the caller's goroutine, so Chain cannot return, but the
// strategies after the one that called it still run.
func TestChainRunsPastAGoexit(t *testing.T) {
	t.Parallel()
	var log []string
	s := cleanup.Chain(recorder{name: "a", log: &log}, exiting{}, recorder{name: "b", log: &log}, exiting{}, recorder{name: "c", log: &log})
	for _, call := range []func() error{
		func() error { return s.Cleanup(context.Background(), "X", 2) },
		func() error { return s.MarkComplete(context.Background(), "X") },
	} {
		returned := make(chan bool, 1)
		go func() {
			defer close(returned)
			_ = call()
			returned <- true
		}()
		require.False(t, <-returned, "Goexit is not stopped")
	}
	require.Equal(t, []string{
		"a.cleanup(X,2)", "b.cleanup(X,2)", "c.cleanup(X,2)",
		"a.complete(X)", "b.complete(X)", "c.complete(X)",
	}, log)
}
