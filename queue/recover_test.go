package queue_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
)

// explosive's MarshalJSON panics.
type explosive struct{}

func (explosive) Kind() string                 { return "explosive" }
func (explosive) MarshalJSON() ([]byte, error) { panic("explosive payload") }

// logged is a runner's log, for tests that read it.
type logged struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logged) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(lockedWriter{&l.mu, &l.buf}, nil))
}

func (l *logged) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// A schedule whose Jobs function panics or calls runtime.Goexit, or whose
// jobs' MarshalJSON panics, or whose jobs Enqueue refuses, does not crash its
// runner, end its schedule loop, or stall the
// schedule: the tick is spent without jobs, logged at Error, listed by the
// review as a tick that created nothing, and the next tick fires.
func TestScheduleTickWhoseJobsCannotBeBuiltIsSkipped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(r *queue.Registry) {
		basic(t)(r)
		require.NoError(t, queue.Register(r, nopHandler[explosive]()))
	})
	require.NoError(t, e.reg.Schedule(queue.Periodic{Name: "m", Spec: queue.Cron("* * * * *"), Grace: time.Second,
		Jobs: func(tk queue.Tick) []queue.Params {
			switch tk.At.Minute() {
			case 0:
				panic("boom")
			case 1:
				return []queue.Params{{Args: noop{}}, {Args: explosive{}}}
			case 2:
				return []queue.Params{{Args: noop{}}, {Args: report{County: "Travis\x00"}}}
			case 3:
				runtime.Goexit() // as a require in a test's Jobs would
			}
			return []queue.Params{{Args: noop{}}}
		}}))
	var log logged
	c, err := queue.NewClient(e.db.Gorm, e.reg, queue.WithLogger(log.logger()), queue.WithObserver(e.events))
	require.NoError(t, err)
	clock := newClock(start) // 22:59:30
	r, err := queue.NewRunner(c, queue.WithClock(clock), queue.WithPollInterval(50*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, r.Stop(context.Background())) })

	<-clock.Waiting(1)
	clock.Set(start.Add(5 * time.Minute)) // 23:04:30: the ticks of 23:00 to 23:04 are due
	ev := e.events.Wait(t, queue.EventScheduled, 0, 1)[0]
	require.Equal(t, "m@2025-12-08T23:04:00Z", ev.RunID, "the schedule moved on past the ticks it could not build")
	require.Equal(t, int64(1), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"), "nothing of the skipped ticks, not even their good jobs")

	logs := log.String()
	require.Equal(t, 4, strings.Count(logs, `"msg":"queue: schedule tick skipped: its jobs could not be built"`), logs)
	require.Contains(t, logs, "runtime.Goexit")
	require.Contains(t, logs, `"err":"panic: boom"`)
	require.Contains(t, logs, "panic: explosive payload")
	require.Contains(t, logs, `args.County: NUL byte at offset 6`)
	require.Contains(t, logs, `"stack":"goroutine `)
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var rec struct{ Level, Msg string }
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		if strings.Contains(rec.Msg, "skipped") {
			require.Equal(t, "ERROR", rec.Level)
		}
	}
	rv, err := c.Review(context.Background(), queue.ReviewQuery{RunID: "m@2025-12-08T23:00:00Z"})
	require.NoError(t, err)
	require.Len(t, rv.MissedTicks, 1, "the review lists the skipped tick")
}

type brokenChild struct {
	Note string `json:"note"`
	Boom *explosive
}

func (brokenChild) Kind() string { return "broken_child" }

// A rule whose child cannot be built, because its MarshalJSON panics, its
// function calls runtime.Goexit, or Enqueue would refuse it, fails as a rule
// whose function panics:
// the parent completes, no child is released, the runner lives on.
func TestRuleWhoseChildCannotBeBuilt(t *testing.T) {
	t.Parallel()
	var log logged
	e := newEnv(t, func(r *queue.Registry) {
		require.NoError(t, queue.Register(r, nopHandler[weekly]()))
		require.NoError(t, queue.Register(r, nopHandler[monthly]()))
		require.NoError(t, queue.Register(r, nopHandler[brokenChild]()))
		require.NoError(t, queue.Depend(r, queue.Rule{Name: "explodes", Parents: []string{"weekly"}, Each: true},
			func([]queue.JobRecord) (brokenChild, []queue.EnqueueOption) {
				return brokenChild{Boom: &explosive{}}, nil
			}))
		require.NoError(t, queue.Depend(r, queue.Rule{Name: "exits", Parents: []string{"monthly"}, Each: true},
			func([]queue.JobRecord) (brokenChild, []queue.EnqueueOption) {
				runtime.Goexit()
				return brokenChild{}, nil
			}))
		require.NoError(t, queue.Depend(r, queue.Rule{Name: "refused", Parents: []string{"monthly"}, Each: true},
			func([]queue.JobRecord) (brokenChild, []queue.EnqueueOption) {
				return brokenChild{Note: "ok\xff"}, []queue.EnqueueOption{queue.CorrelationID("fine")}
			}))
	})
	c, err := queue.NewClient(e.db.Gorm, e.reg, queue.WithLogger(log.logger()), queue.WithObserver(e.events))
	require.NoError(t, err)
	w, err := c.Enqueue(context.Background(), weekly{})
	require.NoError(t, err)
	m, err := c.Enqueue(context.Background(), monthly{})
	require.NoError(t, err)
	r, err := queue.NewRunner(c, queue.WithPollInterval(50*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, r.Stop(context.Background())) })
	for _, id := range []int64{w.Job.ID, m.Job.ID} {
		done := e.events.Wait(t, queue.EventCompleted, id, 1)[0]
		require.Equal(t, 1, done.Attempt, "completed at once, not re-run")
	}
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE kind = 'broken_child'"))
	logs := log.String()
	require.Contains(t, logs, "panic: explosive payload")
	require.Contains(t, logs, "args.Note: invalid UTF-8 at offset 2")
	require.Contains(t, logs, "runtime.Goexit")
	require.Equal(t, 3, strings.Count(logs, "dependency rule failed to build its child"), logs)
	other, err := c.Enqueue(context.Background(), weekly{})
	require.NoError(t, err)
	e.events.Wait(t, queue.EventCompleted, other.Job.ID, 1) // the runner lives on, results and all
}

// A handler's error message is the user's text, written as the job's last
// error: bytes PostgreSQL would not store (a NUL, bytes that are not UTF-8)
// are replaced rather than failing the statement, which writes other jobs'
// results too.
func TestErrorMessagesThatPostgreSQLWouldNotStore(t *testing.T) {
	t.Parallel()
	e := newEnv(t, registerReport(t, func(_ context.Context, j *queue.Job[report]) error {
		if j.Args.County == "nasty" {
			return errors.New("bad\x00byte \xff here")
		}
		return errors.New("plain")
	}, queue.MaxAttempts(1)))
	res, err := e.client.EnqueueMany(context.Background(), []queue.Params{{Args: report{County: "nasty"}}, {Args: report{County: "plain"}}})
	require.NoError(t, err)
	e.runner(t)
	recs, err := e.client.Wait(context.Background(), res[0].Job.ID, res[1].Job.ID)
	require.NoError(t, err)
	require.Equal(t, queue.StatusFailed, recs[0].Status)
	require.Equal(t, "bad\uFFFDbyte \uFFFD here", *recs[0].LastError)
	require.Equal(t, 1, recs[0].Attempts)
	require.Equal(t, queue.StatusFailed, recs[1].Status)
	require.Equal(t, "plain", *recs[1].LastError)
}

// SetOutput refuses what jsonb would not store as given, as Enqueue does,
// with ErrInvalidPayload, instead of a raw database error or a silently
// altered output.
func TestSetOutputRefusesWhatPostgreSQLWouldNotStore(t *testing.T) {
	t.Parallel()
	errs := make(chan error, 2)
	e := newEnv(t, registerReport(t, func(ctx context.Context, j *queue.Job[report]) error {
		errs <- j.SetOutput(ctx, map[string]string{"note": "nul\x00"})
		errs <- j.SetOutput(ctx, map[string]string{"note": "ok\xff"})
		return j.SetOutput(ctx, map[string]string{"note": "fine"})
	}))
	id := enqueue(t, e, report{})
	e.runner(t)
	e.events.Wait(t, queue.EventCompleted, id, 1)
	for range 2 {
		err := <-errs
		require.ErrorIs(t, err, queue.ErrInvalidPayload)
		require.ErrorContains(t, err, `output["note"]`)
	}
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.JSONEq(t, `{"note":"fine"}`, string(rec.Output))
}
