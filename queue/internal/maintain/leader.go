package maintain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
	"github.com/sheaf-dev/sheaf/worker"
)

// Elector is where runners elect their leader: store.Store.
type Elector interface {
	// Lead makes holder the leader for ttl if no one leads, the leader's
	// lease has expired, or holder leads already.
	Lead(ctx context.Context, holder string, ttl time.Duration) (store.LeadResult, error)
	// Resign gives holder's leadership up, if it holds it.
	Resign(ctx context.Context, holder string) error
}

// Config is what a Leader is built from. ID, TTL, Elector and Log must be
// set.
type Config struct {
	ID      string        // the leader's name in the leadership row: the runner's ID
	TTL     time.Duration // how long a leadership lasts unless renewed
	Elector Elector
	Tasks   []Task
	Log     *slog.Logger
}

// RetryAfter is how long a task waits before its next round when its Run
// panicked, or returned a delay that is not positive.
const RetryAfter = time.Minute

// Leader campaigns for the leadership of the maintenance and, only while it
// leads, runs its tasks, each on its own goroutine and at its own cadence,
// the first round of each as soon as it becomes leader.
//
// A leadership lasts TTL from the database's time of the statement that
// took or renewed it. The leader renews it every TTL/3, each try bounded by
// TTL/3, and when one fails tries again after 20 ms, then after pauses that
// double up to TTL/10. Its tasks keep running for 2·TTL/3 from the moment
// it sent the last renewal that succeeded: then, unless a later renewal has
// succeeded, their contexts are cancelled, whatever the renewals in
// flight, and they are joined. The database cannot have expired the
// leadership before TTL from that moment (its clock and the runner's run at
// the same rate; what they read does not matter), so a task that returns
// within TTL/3 of its cancellation has returned before any other runner
// can lead, and two leaders never run tasks at once. A task that ignores
// its cancellation longer loses that guarantee.
//
// A runner that is not the leader campaigns every TTL/3, or as the leader's
// lease runs out if that is sooner; so a leader that dies is replaced about
// TTL after its last renewal, and one that stops (Stop gives the leadership
// up) within TTL/3.
type Leader struct {
	cfg Config

	leading atomic.Bool

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// New returns a leader of cfg's tasks; it campaigns from Start.
func New(cfg Config) *Leader {
	return &Leader{cfg: cfg, done: make(chan struct{})}
}

// Start starts campaigning; ctx carries values to the tasks' contexts, and
// ending it stops the leader as Stop does. Calls after the first, and
// after Stop, do nothing.
func (l *Leader) Start(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return
	}
	l.started = true
	ctx, l.cancel = context.WithCancel(ctx)
	go func() {
		defer close(l.done)
		l.campaign(ctx)
	}()
}

// Stop stops campaigning, cancels the running tasks, waits for them, and
// gives the leadership up, so that another runner takes over at its next
// campaign. It returns once all that is done, or, wrapping ctx's error,
// when ctx ends first (Done is closed once it is done). The leadership is
// given up only once the tasks have returned: until then, the lease
// expires in its time. Stop is idempotent, and safe without Start.
func (l *Leader) Stop(ctx context.Context) error {
	l.mu.Lock()
	if !l.started {
		l.started = true
		close(l.done)
	}
	if l.cancel != nil {
		l.cancel()
	}
	l.mu.Unlock()
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("queue: maintenance: stop: %w: its tasks have not returned yet", ctx.Err())
	}
}

// Done is closed once the leader has stopped and every goroutine it
// started has returned.
func (l *Leader) Done() <-chan struct{} { return l.done }

// Leading reports whether the leader runs its tasks now.
func (l *Leader) Leading() bool { return l.leading.Load() }

// tasks are the tasks of one leadership, running.
type tasks struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	stopAt time.Time // unless a renewal succeeds before
}

// campaign is the leader's loop: it takes and renews the leadership,
// starts the tasks on taking it, and stops them on losing it, on running
// out of time, and on Stop.
func (l *Leader) campaign(ctx context.Context) {
	renewEvery := l.cfg.TTL / 3
	keep := l.cfg.TTL - renewEvery // how long the tasks run after a renewal was sent
	var (
		run     *tasks
		mayHold bool          // a Lead may have made this runner leader
		pause   time.Duration // after failed renewals, growing
		failing bool
		next    time.Duration // the first campaign is at once
	)
	stop := func(why string, level slog.Level) {
		if run == nil {
			return
		}
		run.cancel()
		run.wg.Wait()
		run = nil
		l.leading.Store(false)
		l.cfg.Log.Log(context.Background(), level, "queue: this runner no longer leads the maintenance", "why", why)
	}
	defer func() {
		stop("it is stopping", slog.LevelInfo)
		if mayHold {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(renewEvery, time.Second))
			defer cancel()
			if err := l.cfg.Elector.Resign(rctx, l.cfg.ID); err != nil {
				l.cfg.Log.Warn("queue: could not give the maintenance's leadership up; another runner takes over when it expires",
					"err", err, "ttl", l.cfg.TTL)
			}
		}
	}()
	expired := func() { stop("its leadership was not renewed in time", slog.LevelWarn) }
	for {
		if _, ok := waitFor(ctx, time.After(next), &run, expired); !ok {
			return
		}
		sent := time.Now()
		mayHold = true
		res, ok := l.lead(ctx, renewEvery, &run, expired)
		if !ok {
			return
		}
		switch {
		case res.err != nil:
			if ctx.Err() != nil {
				return
			}
			if !failing {
				failing = true
				l.cfg.Log.Warn("queue: the maintenance's leadership could not be renewed or taken; trying again", "err", res.err,
					"leading", run != nil)
			}
			l.cfg.Log.Debug("queue: campaign failed", "err", res.err)
			pause = min(max(2*pause, 20*time.Millisecond), max(l.cfg.TTL/10, 20*time.Millisecond))
			next = pause
			continue
		case !res.Led:
			mayHold = false
			stop("another runner leads", slog.LevelWarn)
			next = max(min(renewEvery, res.Left), 20*time.Millisecond)
		case time.Now().Before(sent.Add(keep)):
			if run == nil {
				// Leading before the tasks start: a task that reports its
				// start must find its leader leading.
				l.leading.Store(true)
				run = l.start(ctx)
				l.cfg.Log.Info("queue: this runner leads the maintenance", "tasks", len(l.cfg.Tasks), "ttl", l.cfg.TTL)
			}
			run.stopAt = sent.Add(keep)
			next = renewEvery
		default:
			// Renewed, but so late that the time the tasks could run has
			// passed: they have stopped. The next renewal starts them; a
			// server this slow is worth a warning, once.
			if !failing {
				failing = true
				l.cfg.Log.Warn("queue: the maintenance's leadership was renewed too late to run its tasks; trying again",
					"took", time.Since(sent), "ttl", l.cfg.TTL)
			}
			next = 0
			continue
		}
		if failing {
			failing = false
			l.cfg.Log.Info("queue: the maintenance's campaign works again")
		}
		pause = 0
	}
}

// leadResult is a Lead's outcome.
type leadResult struct {
	store.LeadResult
	err error
}

// lead runs one Lead, bounded by timeout, on a goroutine of its own, so
// that the tasks are stopped in time while it waits for a server that
// does not answer. It returns false if ctx ended meanwhile, once the call
// has returned.
func (l *Leader) lead(ctx context.Context, timeout time.Duration, run **tasks, expired func()) (leadResult, bool) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ch := make(chan leadResult, 1)
	go func() {
		res, err := l.cfg.Elector.Lead(cctx, l.cfg.ID, l.cfg.TTL)
		ch <- leadResult{res, err}
	}()
	res, ok := waitFor(ctx, ch, run, expired)
	if !ok {
		cancel()
		<-ch
	}
	return res, ok
}

// waitFor waits for a value from ch, calling expired (which stops the
// tasks) if the tasks' time runs out meanwhile. It returns false if ctx
// ends first.
func waitFor[T any](ctx context.Context, ch <-chan T, run **tasks, expired func()) (T, bool) {
	for {
		var out <-chan time.Time
		if *run != nil {
			out = time.After(time.Until((*run).stopAt))
		}
		select {
		case v := <-ch:
			return v, true
		case <-out:
			expired()
		case <-ctx.Done():
			var zero T
			return zero, false
		}
	}
}

// start starts the tasks, each on a goroutine of its own.
func (l *Leader) start(ctx context.Context) *tasks {
	ctx, cancel := context.WithCancel(ctx)
	run := &tasks{cancel: cancel}
	for _, t := range l.cfg.Tasks {
		run.wg.Go(func() { l.loop(ctx, t) })
	}
	return run
}

// loop runs task's rounds until ctx ends.
func (l *Leader) loop(ctx context.Context, task Task) {
	for ctx.Err() == nil {
		next := RetryAfter
		worker.Try(func() error {
			d, err := task.Run(ctx)
			if d > 0 {
				next = d
			}
			return err
		}, func(err error) {
			var pe *worker.PanicError
			if errors.As(err, &pe) {
				l.cfg.Log.Error("queue: maintenance task panicked", "task", task.Name(), "err", err, "retry_after", RetryAfter)
				return
			}
			if ctx.Err() != nil {
				// Cut short by a lost leadership or a stop, whatever the
				// error says: a transaction the context rolled back fails
				// its next statement with sql.ErrTxDone, not ctx.Err().
				l.cfg.Log.Debug("queue: maintenance task cut short", "task", task.Name(), "err", err)
				return
			}
			l.cfg.Log.Error("queue: maintenance task failed", "task", task.Name(), "err", err, "next", next)
		})
		select {
		case <-ctx.Done():
		case <-time.After(next):
		}
	}
}
