package maintain_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue/internal/maintain"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

var quiet = slog.New(slog.DiscardHandler)

// taskFunc is a Task of a function.
type taskFunc struct {
	name string
	run  func(ctx context.Context) (time.Duration, error)
}

func (t taskFunc) Name() string                                   { return t.name }
func (t taskFunc) Run(ctx context.Context) (time.Duration, error) { return t.run(ctx) }

// memElector is a leadership in memory, by the clock of the test's bubble,
// which the test can cut runners off from: their Leads wait until their
// contexts end, as a statement to an unreachable server does.
type memElector struct {
	mu      sync.Mutex
	holder  string
	until   time.Time
	cut     map[string]bool
	resigns atomic.Int64
	// stall, if set, is how long each Lead takes before it begins,
	// whatever its context: a process that was not scheduled.
	stall atomic.Int64
}

func (e *memElector) Lead(ctx context.Context, holder string, ttl time.Duration) (store.LeadResult, error) {
	time.Sleep(time.Duration(e.stall.Load()))
	e.mu.Lock()
	if e.cut[holder] {
		e.mu.Unlock()
		<-ctx.Done()
		return store.LeadResult{}, ctx.Err()
	}
	defer e.mu.Unlock()
	now := time.Now()
	if e.holder != "" && e.holder != holder && now.Before(e.until) {
		return store.LeadResult{Left: e.until.Sub(now)}, nil
	}
	e.holder, e.until = holder, now.Add(ttl)
	return store.LeadResult{Led: true}, nil
}

func (e *memElector) Resign(_ context.Context, holder string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.resigns.Add(1)
	if e.cut[holder] {
		return errors.New("cut off")
	}
	if e.holder == holder {
		e.holder = ""
	}
	return nil
}

func (e *memElector) setCut(holder string, cut bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cut == nil {
		e.cut = map[string]bool{}
	}
	e.cut[holder] = cut
}

func (e *memElector) lease() (string, time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.holder, e.until
}

// overlap is a task that holds a round open until its context ends, and
// counts how many of its copies run at once, across leaders.
type overlap struct {
	mu                sync.Mutex
	running, most     int
	rounds            map[string]int // by leader
	cancelledAt       map[string]time.Time
	started, finished chan string
}

func newOverlap() *overlap {
	return &overlap{rounds: map[string]int{}, cancelledAt: map[string]time.Time{},
		started: make(chan string, 100), finished: make(chan string, 100)}
}

func (o *overlap) task(leader string) maintain.Task {
	return taskFunc{name: "overlap", run: func(ctx context.Context) (time.Duration, error) {
		o.mu.Lock()
		o.running++
		o.most = max(o.most, o.running)
		o.rounds[leader]++
		o.mu.Unlock()
		o.started <- leader
		<-ctx.Done()
		o.mu.Lock()
		o.running--
		o.cancelledAt[leader] = time.Now()
		o.mu.Unlock()
		o.finished <- leader
		return time.Second, ctx.Err()
	}}
}

func (o *overlap) mostAtOnce() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.most
}

const ttl = 30 * time.Second

func newLeader(el maintain.Elector, id string, tasks ...maintain.Task) *maintain.Leader {
	return maintain.New(maintain.Config{ID: id, TTL: ttl, Elector: el, Tasks: tasks, Log: quiet})
}

// A leader cut off from the database stops its tasks 2/3 of a lease after
// it sent its last renewal that succeeded, before the lease can lapse; a
// runner that waits takes over once it has, and the task never runs on
// both at once. Healed, the first finds the second leading and stays out.
func TestCutOffLeaderStopsItsTasksBeforeItsLeaseLapses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		el := &memElector{}
		o := newOverlap()
		a := newLeader(el, "a", o.task("a"))
		a.Start(ctx)
		require.Equal(t, "a", <-o.started)
		require.True(t, a.Leading())
		b := newLeader(el, "b", o.task("b"))
		b.Start(ctx)
		synctest.Wait()
		require.False(t, b.Leading(), "a leads")

		time.Sleep(ttl / 3) // a's renewal at 10 s is its last
		synctest.Wait()
		_, until := el.lease()
		lastSent := time.Now()
		el.setCut("a", true)
		require.Equal(t, "a", <-o.finished)
		require.Equal(t, lastSent.Add(2*ttl/3), o.cancelledAt["a"], "stopped 2/3 of a lease after the last renewal was sent")
		require.True(t, o.cancelledAt["a"].Before(until), "before its lease could lapse")
		synctest.Wait()
		require.False(t, a.Leading())

		require.Equal(t, "b", <-o.started)
		require.Equal(t, "b", func() string { h, _ := el.lease(); return h }())
		took := time.Since(until)
		require.GreaterOrEqual(t, took, time.Duration(0), "b took over once a's lease had lapsed")
		require.LessOrEqual(t, took, ttl/3, "and within a campaign's interval")
		require.Equal(t, 1, o.mostAtOnce(), "never on both")

		el.setCut("a", false)
		time.Sleep(2 * ttl)
		synctest.Wait()
		require.False(t, a.Leading(), "b leads")
		require.True(t, b.Leading())
		require.NoError(t, a.Stop(ctx))
		require.NoError(t, b.Stop(ctx))
		require.Equal(t, 1, o.mostAtOnce())
	})
}

// A leader that stops cancels its tasks, waits for them, and gives the
// leadership up, so that the runner waiting takes over within a campaign's
// interval rather than when the lease would have lapsed.
func TestStopHandsTheLeadershipOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		el := &memElector{}
		o := newOverlap()
		a, b := newLeader(el, "a", o.task("a")), newLeader(el, "b", o.task("b"))
		a.Start(ctx)
		require.Equal(t, "a", <-o.started)
		b.Start(ctx)
		time.Sleep(ttl / 2)
		synctest.Wait()
		stopped := time.Now()
		require.NoError(t, a.Stop(ctx))
		require.Equal(t, "a", <-o.finished, "Stop returned after the task")
		require.Equal(t, stopped, time.Now(), "at once")
		require.False(t, a.Leading())
		require.Equal(t, "b", <-o.started)
		require.LessOrEqual(t, time.Since(stopped), ttl/3, "b took over at its next campaign")
		require.NoError(t, b.Stop(ctx))
		require.NoError(t, b.Stop(ctx), "Stop is idempotent")
		require.Equal(t, 1, o.mostAtOnce())
		h, _ := el.lease()
		require.Empty(t, h, "given up")
	})
}

// Each task runs at the cadence its rounds return; a task that fails runs
// again after its delay, one that panics after RetryAfter, and neither
// disturbs the others. A leader that loses the leadership to a runner that
// took it over stops its tasks.
func TestTasksRunAtTheirOwnCadence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		el := &memElector{}
		var fast, failing, panicky atomic.Int64
		l := newLeader(el, "a",
			taskFunc{"fast", func(context.Context) (time.Duration, error) { fast.Add(1); return time.Second, nil }},
			taskFunc{"failing", func(context.Context) (time.Duration, error) {
				failing.Add(1)
				return 10 * time.Second, errors.New("boom")
			}},
			taskFunc{"panicky", func(context.Context) (time.Duration, error) { panicky.Add(1); panic("boom") }})
		l.Start(ctx)
		time.Sleep(time.Minute + time.Second/2)
		synctest.Wait()
		require.Equal(t, int64(61), fast.Load(), "at once, then every second")
		require.Equal(t, int64(7), failing.Load(), "at once, then every 10 s")
		require.Equal(t, int64(2), panicky.Load(), "at once, then after RetryAfter")

		// Another runner takes the leadership (as if this one's lease had
		// lapsed unseen): the next renewal finds it out.
		el.mu.Lock()
		el.holder, el.until = "b", time.Now().Add(time.Hour)
		el.mu.Unlock()
		time.Sleep(ttl / 3)
		synctest.Wait()
		require.False(t, l.Leading())
		n := fast.Load()
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Equal(t, n, fast.Load(), "no rounds while another leads")
		require.NoError(t, l.Stop(ctx))
		require.Zero(t, el.resigns.Load(), "nothing to give up")
	})
}

// Stop without Start, twice, returns at once; Start after Stop starts
// nothing. A Stop whose context ends before a task that ignores its
// cancellation returns says so, and Done is closed once it has.
func TestStopWithoutStartAndOutOfTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		el := &memElector{}
		l := newLeader(el, "a")
		require.NoError(t, l.Stop(ctx))
		require.NoError(t, l.Stop(ctx))
		l.Start(ctx)
		<-l.Done()
		synctest.Wait()
		require.False(t, l.Leading())
		h, _ := el.lease()
		require.Empty(t, h, "never campaigned")

		release := make(chan struct{})
		deaf := newLeader(el, "deaf", taskFunc{"deaf", func(context.Context) (time.Duration, error) {
			<-release
			return time.Second, nil
		}})
		deaf.Start(ctx)
		synctest.Wait()
		require.True(t, deaf.Leading())
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		require.ErrorIs(t, deaf.Stop(sctx), context.DeadlineExceeded)
		h, _ = el.lease()
		require.Equal(t, "deaf", h, "not given up while its task runs")
		close(release)
		<-deaf.Done()
		h, _ = el.lease()
		require.Empty(t, h, "given up once it returned")
	})
}

// A task cut short by a stop is not logged as a failure, whatever error its
// store gave back: a transaction that its context rolled back fails its
// next statement with database/sql's ErrTxDone, which is not the context's
// error.
func TestTaskCutShortByAStopIsNotAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var logs bytes.Buffer
		started := make(chan struct{})
		task := taskFunc{name: "rollup", run: func(ctx context.Context) (time.Duration, error) {
			close(started)
			<-ctx.Done()
			return 0, fmt.Errorf("rollup: write 2026-11-28: %w", sql.ErrTxDone)
		}}
		l := maintain.New(maintain.Config{ID: "a", TTL: ttl, Elector: &memElector{}, Tasks: []maintain.Task{task},
			Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		l.Start(ctx)
		<-started
		require.NoError(t, l.Stop(ctx))
		require.NotContains(t, logs.String(), "failed")
	})
}

// A renewal that succeeds, but so late that the tasks' time after it was
// sent has passed, starts no task: the leader warns once and campaigns
// again at once, and starts its tasks at the first renewal in time.
func TestLateRenewalsStartNoTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var logs bytes.Buffer
		el := &memElector{}
		el.stall.Store(int64(ttl - ttl/6)) // past the tasks' 2/3 of a lease
		o := newOverlap()
		l := maintain.New(maintain.Config{ID: "a", TTL: ttl, Elector: el, Tasks: []maintain.Task{o.task("a")},
			Log: slog.New(slog.NewTextHandler(&logs, nil))})
		l.Start(ctx)
		time.Sleep(3 * ttl)
		synctest.Wait()
		require.False(t, l.Leading())
		require.Empty(t, o.started)
		require.Equal(t, 1, strings.Count(logs.String(), "renewed too late to run its tasks"), logs.String())

		el.stall.Store(0)
		require.Equal(t, "a", <-o.started)
		synctest.Wait()
		require.True(t, l.Leading())
		require.Contains(t, logs.String(), "campaign works again")
		require.NoError(t, l.Stop(ctx))
	})
}
