package worker_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

func noPanic(t *testing.T) func(string, *worker.PanicError) {
	return func(key string, err *worker.PanicError) { t.Errorf("unexpected panic in %s: %v", key, err) }
}

// stop closes the pool and waits for its workers.
func stop(p *worker.Pool) {
	p.Close()
	<-p.Done()
}

func TestRunsEveryTaskInOrderPerKey(t *testing.T) {
	t.Parallel()
	p := worker.New(4, 1000, noPanic(t))
	p.Start(context.Background())
	var mu sync.Mutex
	got := map[string][]int{}
	for i := range 100 {
		for _, key := range []string{"a", "b", "c"} {
			require.NoError(t, p.Submit(key, func(context.Context) {
				mu.Lock()
				got[key] = append(got[key], i)
				mu.Unlock()
			}))
		}
	}
	stop(p)
	for _, key := range []string{"a", "b", "c"} {
		require.Len(t, got[key], 100)
		for i, v := range got[key] {
			require.Equal(t, i, v, "tasks of one key run in submission order")
		}
	}
	require.Zero(t, p.Held())
}

func TestOneKeyNeverRunsOnTwoWorkers(t *testing.T) {
	t.Parallel()
	p := worker.New(8, 10_000, noPanic(t))
	p.Start(context.Background())
	var running [4]atomic.Int32
	var overlaps atomic.Int32
	for i := range 2000 {
		k := i % 4
		require.NoError(t, p.Submit(fmt.Sprint(k), func(context.Context) {
			if running[k].Add(1) != 1 {
				overlaps.Add(1)
			}
			running[k].Add(-1)
		}))
	}
	stop(p)
	require.Zero(t, overlaps.Load())
}

// Different keys run at the same time: each task waits for the other to
// start, which can only finish if both run at once. Without parallelism the
// bubble deadlocks and synctest fails the test.
func TestDifferentKeysRunInParallel(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := worker.New(2, 10, noPanic(t))
		p.Start(context.Background())
		var started sync.WaitGroup
		started.Add(2)
		for _, key := range []string{"x", "y"} {
			require.NoError(t, p.Submit(key, func(context.Context) {
				started.Done()
				started.Wait()
			}))
		}
		stop(p)
	})
}

func TestFullAndRoom(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := worker.New(1, 2, noPanic(t))
		release := make(chan struct{})
		require.False(t, p.Full())
		select {
		case <-p.Room():
		default:
			t.Fatal("Room must be closed while there is room")
		}
		require.NoError(t, p.Submit("a", func(context.Context) { <-release }))
		require.NoError(t, p.Submit("a", func(context.Context) {}))
		require.True(t, p.Full())
		room := p.Room()
		require.NoError(t, p.Submit("b", func(context.Context) {}), "Submit never blocks, even when full")
		require.Equal(t, 3, p.Held())

		p.Start(context.Background())
		synctest.Wait()
		select {
		case <-room:
			t.Fatal("no room while the first task blocks")
		default:
		}
		close(release)
		<-room // closed once a task finishes and the pool is below its limit
		stop(p)
		require.False(t, p.Full())
	})
}

func TestCloseDrainsQueuedTasks(t *testing.T) {
	t.Parallel()
	p := worker.New(2, 100, noPanic(t))
	var ran atomic.Int32
	for i := range 50 {
		require.NoError(t, p.Submit(fmt.Sprint(i%5), func(context.Context) { ran.Add(1) }))
	}
	p.Start(context.Background())
	p.Close()
	p.Close() // idempotent
	<-p.Done()
	require.Equal(t, int32(50), ran.Load(), "every task submitted before Close runs")
	require.ErrorIs(t, p.Submit("a", func(context.Context) {}), worker.ErrClosed)
}

func TestCloseBeforeStart(t *testing.T) {
	t.Parallel()
	p := worker.New(1, 1, noPanic(t))
	p.Close()
	<-p.Done() // closed even though no worker ever ran
	require.ErrorIs(t, p.Submit("a", func(context.Context) {}), worker.ErrClosed)
}

func TestPanicIsRecoveredAndTheWorkerGoesOn(t *testing.T) {
	t.Parallel()
	var gotKey string
	var gotErr *worker.PanicError
	p := worker.New(1, 10, func(key string, err *worker.PanicError) { gotKey, gotErr = key, err })
	p.Start(context.Background())
	var after atomic.Bool
	require.NoError(t, p.Submit("k", func(context.Context) { panic("boom") }))
	require.NoError(t, p.Submit("k", func(context.Context) { after.Store(true) }))
	stop(p)
	require.Equal(t, "k", gotKey)
	require.Equal(t, "boom", gotErr.Value)
	require.Contains(t, string(gotErr.Stack), "worker_test.go")
	require.True(t, after.Load(), "the worker survives the panic")
}

func TestTasksReceiveTheStartContext(t *testing.T) {
	t.Parallel()
	type key struct{}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	p := worker.New(1, 10, noPanic(t))
	p.Start(ctx)
	cancel()
	var val any
	var err error
	require.NoError(t, p.Submit("k", func(ctx context.Context) { val, err = ctx.Value(key{}), ctx.Err() }))
	stop(p)
	require.Equal(t, "v", val)
	require.ErrorIs(t, err, context.Canceled, "cancelling Start's context reaches the tasks")
}

func TestMisuse(t *testing.T) {
	t.Parallel()
	require.Panics(t, func() { worker.New(0, 1, noPanic(t)) })
	require.Panics(t, func() { worker.New(1, 0, noPanic(t)) })
	require.Panics(t, func() { worker.New(1, 1, nil) })
	p := worker.New(1, 1, noPanic(t))
	p.Start(context.Background())
	require.Panics(t, func() { p.Start(context.Background()) })
	stop(p)
}

func TestSafely(t *testing.T) {
	t.Parallel()
	require.NoError(t, worker.Safely(func() error { return nil }))
	sentinel := errors.New("plain")
	require.Same(t, sentinel, worker.Safely(func() error { return sentinel }))

	err := worker.Safely(func() error { panic(sentinel) })
	var pe *worker.PanicError
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, sentinel, "a panic with an error unwraps to it")
	require.Equal(t, "panic: plain", err.Error())

	err = worker.Safely(func() error { panic(42) })
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 42, pe.Value)
	require.NoError(t, pe.Unwrap())
}

// Try hands every way fn can fail to failed: an error, a panic, and a Goexit,
// after which it cannot return; a failure in failed is handled in turn.
func TestTry(t *testing.T) {
	t.Parallel()
	var got []error
	record := func(err error) { got = append(got, err) }
	require.True(t, worker.Try(func() error { return nil }, record))
	sentinel := errors.New("plain")
	require.False(t, worker.Try(func() error { return sentinel }, record))
	require.False(t, worker.Try(func() error { panic("boom") }, record))
	require.Len(t, got, 2, "success calls nothing")
	require.Same(t, sentinel, got[0])
	var pe *worker.PanicError
	require.ErrorAs(t, got[1], &pe)
	require.Equal(t, "boom", pe.Value)

	got = nil
	returned := make(chan bool, 1)
	go func() {
		defer close(returned)
		worker.Try(func() error { runtime.Goexit(); return nil }, func(err error) {
			record(err)
			worker.Try(func() error { panic("while unwinding") }, record)
			record(errors.New("failed ran to its end"))
		})
		returned <- true
	}()
	require.False(t, <-returned, "nothing stops a Goexit")
	require.Len(t, got, 3)
	require.ErrorIs(t, got[0], worker.ErrGoexit)
	require.ErrorAs(t, got[0], &pe, "a Goexit is reported like a panic")
	require.Equal(t, "worker: runtime.Goexit called", got[0].Error())
	require.Contains(t, string(pe.Stack), "worker_test.go")
	require.ErrorAs(t, got[1], &pe)
	require.Equal(t, "while unwinding", pe.Value)
	require.EqualError(t, got[2], "failed ran to its end")
}

// onPanic may itself end its goroutine: the pool has replaced the worker
// already, and runs the rest. Done waits for every onPanic to return.
func TestOnPanicThatEndsItsGoroutine(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var reports atomic.Int32
		p := worker.New(1, 10, func(string, *worker.PanicError) {
			reports.Add(1)
			<-release
			runtime.Goexit()
		})
		p.Start(context.Background())
		var ran []int
		require.NoError(t, p.Submit("k", func(context.Context) { panic("boom") }))
		require.NoError(t, p.Submit("k", func(context.Context) { ran = append(ran, 1) }))
		require.NoError(t, p.Submit("k", func(context.Context) { runtime.Goexit() }))
		require.NoError(t, p.Submit("k", func(context.Context) { ran = append(ran, 2) }))
		p.Close()
		synctest.Wait()
		select {
		case <-p.Done():
			t.Fatal("Done must wait for onPanic")
		default:
		}
		close(release)
		<-p.Done()
		require.Equal(t, []int{1, 2}, ran)
		require.Equal(t, int32(2), reports.Load())
		require.Zero(t, p.Held())
	})
}

// A task that calls runtime.Goexit (as a test's FailNow does) ends its
// goroutine; the pool reports it, keeps the key's order and its worker
// count, and drains normally.
func TestGoexitInATask(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var reported []error
	p := worker.New(1, 100, func(key string, err *worker.PanicError) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, err)
	})
	p.Start(context.Background())
	var ran []int
	for i := range 5 {
		require.NoError(t, p.Submit("k", func(context.Context) {
			mu.Lock()
			ran = append(ran, i)
			mu.Unlock()
			if i == 2 {
				runtime.Goexit()
			}
		}))
	}
	stop(p)
	require.Equal(t, []int{0, 1, 2, 3, 4}, ran, "the key's later tasks still run, in order")
	require.Len(t, reported, 1)
	require.ErrorContains(t, reported[0], "runtime.Goexit")
	require.Zero(t, p.Held())
}

// A key that always has work does not keep the others waiting.
func TestABusyKeyDoesNotStarveOthers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := worker.New(1, 1000, noPanic(t))
		var order []string
		var mu sync.Mutex
		record := func(s string) worker.Task {
			return func(context.Context) { mu.Lock(); order = append(order, s); mu.Unlock() }
		}
		for range 50 {
			require.NoError(t, p.Submit("busy", record("busy")))
		}
		require.NoError(t, p.Submit("other", record("other")))
		p.Start(context.Background())
		stop(p)
		at := slices.Index(order, "other")
		require.GreaterOrEqual(t, at, 0)
		require.Less(t, at, 3, "the other key runs after at most a task or two of the busy one, not after all 50")
	})
}

// A strand that never empties reuses its slice instead of growing it.
func TestABusyKeyDoesNotGrowMemory(t *testing.T) {
	t.Parallel()
	p := worker.New(1, 4, noPanic(t))
	p.Start(context.Background())
	var ran atomic.Int64
	for range 100_000 {
		<-p.Room()
		require.NoError(t, p.Submit("k", func(context.Context) { ran.Add(1) }))
	}
	stop(p)
	require.Equal(t, int64(100_000), ran.Load())
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	require.Less(t, ms.HeapAlloc, uint64(16<<20), "100k tasks through one key must not leave their slots behind")
}
