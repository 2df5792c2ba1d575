package run

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestLoopStopWithoutStartAndTwice(t *testing.T) {
	var l Loop
	l.Stop()
	ran := make(chan struct{})
	l.Start(context.Background(), func(ctx context.Context) { close(ran); <-ctx.Done() })
	<-ran
	l.Stop()
	l.Stop()
}

func TestPoolRunsInOrderAndFirstGoesAhead(t *testing.T) {
	var mu sync.Mutex
	var got []int
	gate := make(chan struct{})
	p := NewPool(func(v int) {
		if v == 0 {
			<-gate // hold the only worker while the rest queue up
			return
		}
		mu.Lock()
		got = append(got, v)
		mu.Unlock()
	})
	p.Start(1)
	p.Push(false, 0)
	p.Push(false, 1, 2, 3)
	p.Push(true, 9)
	close(gate)
	p.Stop() // runs what waits before returning
	require.Equal(t, []int{9, 1, 2, 3}, got)
}

func TestPoolTakeRemovesWaitingItems(t *testing.T) {
	var ran atomic.Int64
	gate := make(chan struct{})
	started := make(chan struct{})
	p := NewPool(func(v int) {
		if v == 0 {
			close(started)
			<-gate
			return
		}
		ran.Add(int64(v))
	})
	p.Start(1)
	p.Push(false, 0)
	<-started
	p.Push(false, 1, 2, 3, 4)
	oldest, ok := p.Oldest()
	require.True(t, ok)
	require.Equal(t, 1, oldest)
	taken := p.Take(func(v int) bool { return v%2 == 0 })
	require.Equal(t, []int{2, 4}, taken)
	close(gate)
	p.Stop()
	require.Equal(t, int64(1+3), ran.Load(), "taken items never run")
	_, ok = p.Oldest()
	require.False(t, ok)
}

func TestPoolReplaceKeepsTheWorkerCount(t *testing.T) {
	var ran atomic.Int64
	var p *Pool[int]
	p = NewPool(func(v int) {
		if v < 0 {
			p.Replace() // as the queue does for a handler that calls Goexit
			runtime.Goexit()
		}
		ran.Add(1)
	})
	p.Start(1)
	p.Push(false, -1, 1, 2)
	p.Stop()
	require.Equal(t, int64(2), ran.Load(), "the replacement ran the rest")
}

func TestBatcherFlushesEverythingInBatches(t *testing.T) {
	var mu sync.Mutex
	var batches [][]int
	b := Batcher[int]{Max: 3, LingerBatch: 2, Linger: time.Millisecond, Busy: func() bool { return true },
		Flush: func(v []int) {
			mu.Lock()
			defer mu.Unlock()
			batches = append(batches, append([]int(nil), v...))
		}}
	b.Start(10)
	for i := range 10 {
		b.Send(i)
	}
	require.True(t, b.WaitFlushed(10*time.Second))
	mu.Lock()
	var all []int
	for _, v := range batches {
		require.LessOrEqual(t, len(v), 3)
		all = append(all, v...)
	}
	mu.Unlock()
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, all)
	b.Send(10)
	b.Stop()
	require.Equal(t, []int{10}, batches[len(batches)-1], "Stop flushes what was sent")
}

func TestBatcherWaitFlushedGivesUpAtItsLimit(t *testing.T) {
	gate := make(chan struct{})
	b := Batcher[int]{Max: 10, Busy: func() bool { return false }, Flush: func([]int) { <-gate }}
	b.Start(1)
	b.Send(1)
	began := time.Now()
	require.False(t, b.WaitFlushed(20*time.Millisecond), "not flushed")
	require.GreaterOrEqual(t, time.Since(began), 20*time.Millisecond)
	close(gate)
	b.Stop()
}

// An item reserved and not yet sent is waited for: a WaitFlushed that
// begins between Reserve and SendReserved does not return early.
func TestBatcherWaitFlushedWaitsForReservedItems(t *testing.T) {
	flushed := make(chan []int, 1)
	b := Batcher[int]{Max: 10, Busy: func() bool { return false }, Flush: func(v []int) { flushed <- append([]int(nil), v...) }}
	b.Start(1)
	b.Reserve()
	require.False(t, b.WaitFlushed(time.Millisecond), "the reserved item is not flushed yet")
	waited := make(chan bool, 1)
	go func() { waited <- b.WaitFlushed(time.Minute) }()
	b.SendReserved(7)
	require.Equal(t, []int{7}, <-flushed)
	require.True(t, <-waited)
	b.Stop()
}

func TestPollerWakesForLaterValuesAndPolls(t *testing.T) {
	fetched := make(chan struct{}, 100)
	due := make(chan string, 1)
	var polled atomic.Int64
	p := Poller[string]{Every: time.Hour, Clock: sysClock{},
		Opens:  func(time.Time) time.Time { return time.Time{} },
		Fetch:  func(context.Context) time.Duration { fetched <- struct{}{}; return 0 },
		Polled: func() { polled.Add(1) },
		Due:    func(v string) { due <- v }}
	p.Start(context.Background())
	defer p.Stop()
	<-fetched // the first fetch is at once
	p.Wake()
	<-fetched
	p.Later(time.Now().Add(10*time.Millisecond), "retry")
	require.Equal(t, "retry", <-due)
	require.Positive(t, polled.Load(), "the timer that woke the first fetch counts as a poll")
}

func TestPollerFetchesAgainWhenAsked(t *testing.T) {
	var n atomic.Int64
	done := make(chan struct{})
	p := Poller[int]{Every: time.Hour, Clock: sysClock{},
		Opens: func(time.Time) time.Time { return time.Time{} },
		Fetch: func(context.Context) time.Duration {
			if n.Add(1) == 3 {
				close(done)
			}
			return time.Millisecond
		},
		Polled: func() {}, Due: func(int) {}}
	p.Start(context.Background())
	<-done
	p.Stop()
}

func TestRenewerRetriesFailuresQuicklyAndRecovers(t *testing.T) {
	var calls atomic.Int64
	ok := make(chan struct{})
	k := Renewer{Every: time.Hour, MaxPause: 5 * time.Millisecond, Lease: time.Hour, Log: quiet,
		Renew: func(context.Context) error {
			if calls.Add(1) < 4 {
				return errors.New("down")
			}
			close(ok)
			return nil
		}}
	k.Start(context.Background())
	k.Poke()
	<-ok // three failures, retried within milliseconds, not after Every
	k.Stop()
	require.Equal(t, int64(4), calls.Load())
}

func TestPeriodicAndReconnect(t *testing.T) {
	ticks := make(chan struct{}, 10)
	p := Periodic{Every: time.Millisecond, Do: func(context.Context) { ticks <- struct{}{} }}
	p.Start(context.Background())
	<-ticks
	<-ticks
	p.Stop()

	var listens atomic.Int64
	again := make(chan struct{})
	l := Reconnect{Pause: time.Millisecond, Log: quiet, Listen: func(ctx context.Context) error {
		if listens.Add(1) == 2 {
			close(again)
			<-ctx.Done()
			return ctx.Err()
		}
		return errors.New("connection reset")
	}}
	l.Start(context.Background())
	<-again // it listened again after the first connection broke
	l.Stop()
}

type sysClock struct{}

func (sysClock) Now() time.Time                         { return time.Now() }
func (sysClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// With Flushes allowing two, a second batch goes out while the first is
// still in Flush, never a third; every item is flushed once, and Stop
// waits for the Flush calls still running.
func TestBatcherFlushesAtOnceAsAllowed(t *testing.T) {
	var mu sync.Mutex
	var got []int
	running, most := 0, 0
	started, gate := make(chan struct{}, 10), make(chan struct{})
	b := Batcher[int]{Max: 2, Busy: func() bool { return false }, Flushes: func() int { return 2 },
		Flush: func(v []int) {
			mu.Lock()
			running++
			most = max(most, running)
			got = append(got, v...)
			mu.Unlock()
			started <- struct{}{}
			<-gate
			mu.Lock()
			running--
			mu.Unlock()
		}}
	b.Start(10)
	for i := range 6 {
		b.Send(i)
	}
	<-started
	<-started // two at once: the second began while the first waits at the gate
	stopped := make(chan struct{})
	go func() {
		b.Stop()
		close(stopped)
	}()
	for range 3 { // let the rest through, one turn at a time
		gate <- struct{}{}
	}
	close(gate)
	<-stopped
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 2, most, "no more than allowed")
	require.Zero(t, running, "Stop waited for every Flush")
	require.ElementsMatch(t, []int{0, 1, 2, 3, 4, 5}, got)
}
