package queue_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
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

// A schedule whose Jobs function panics, or whose jobs' MarshalJSON does, or
// whose jobs Enqueue refuses, does not crash its runner or stall the
// schedule: the tick is spent without jobs, logged at Error, listed by the
// review as a tick that created nothing, and the next tick fires.
func TestScheduleTickWhoseJobsCannotBeBuiltIsSkipped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(r *queue.Registry) {
		basic(t)(r)
		require.NoError(t, queue.Register(r, nopHandler[explosive]()))
	})
	require.NoError(t, e.reg.Schedule(queue.Periodic{Name: "m", Spec: queue.Cron("* * * * *"),
		Jobs: func(tk queue.Tick) []queue.Params {
			switch tk.At.Minute() {
			case 0:
				panic("boom")
			case 1:
				return []queue.Params{{Args: noop{}}, {Args: explosive{}}}
			case 2:
				return []queue.Params{{Args: noop{}}, {Args: report{County: "Travis\x00"}}}
			}
			return []queue.Params{{Args: noop{}}}
		}}))
	var log logged
	c, err := queue.NewClient(e.db.Gorm, e.reg, queue.WithLogger(log.logger()), queue.WithObserver(e.events))
	require.NoError(t, err)
	clock := newManualClock(start) // 22:59:30
	r, err := queue.NewRunner(c, queue.WithClock(clock), queue.WithPollInterval(50*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, r.Stop(context.Background())) })

	clock.awaitWaiters(1)
	clock.Set(start.Add(4 * time.Minute)) // 23:03:30: the ticks of 23:00 to 23:03 are due
	ev := e.events.wait(t, queue.EventScheduled, 0, 1)[0]
	require.Equal(t, "m@2025-12-08T23:03:00Z", ev.RunID, "the schedule moved on past the ticks it could not build")
	require.Equal(t, int64(1), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"), "nothing of the skipped ticks, not even their good jobs")

	logs := log.String()
	require.Equal(t, 3, strings.Count(logs, `"msg":"queue: schedule tick skipped: its jobs could not be built"`), logs)
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

// A rule whose child cannot be built, because its MarshalJSON panics or
// because Enqueue would refuse it, fails as a rule whose function panics:
// the parent completes, no child is released, the runner lives on.
func TestRuleWhoseChildCannotBeBuilt(t *testing.T) {
	t.Parallel()
	var log logged
	e := newEnv(t, func(r *queue.Registry) {
		require.NoError(t, queue.Register(r, nopHandler[weekly]()))
		require.NoError(t, queue.Register(r, nopHandler[monthly]()))
		require.NoError(t, queue.Register(r, nopHandler[brokenChild]()))
		require.NoError(t, queue.Depend(r, queue.Rule{Name: "explodes", Parents: []string{"weekly"}, Each: true},
			func([]queue.JobRecord) (brokenChild, []queue.JobOption) { return brokenChild{Boom: &explosive{}}, nil }))
		require.NoError(t, queue.Depend(r, queue.Rule{Name: "refused", Parents: []string{"monthly"}, Each: true},
			func([]queue.JobRecord) (brokenChild, []queue.JobOption) {
				return brokenChild{Note: "ok\xff"}, []queue.JobOption{queue.CorrelationID("fine")}
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
		done := e.events.wait(t, queue.EventCompleted, id, 1)[0]
		require.Equal(t, 1, done.Attempt, "completed at once, not re-run")
	}
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE kind = 'broken_child'"))
	logs := log.String()
	require.Contains(t, logs, "panic: explosive payload")
	require.Contains(t, logs, "args.Note: invalid UTF-8 at offset 2")
	require.Equal(t, 2, strings.Count(logs, "dependency rule failed to build its child"), logs)
}
