package alert_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/alert"
)

// A job that failed for good fires once, however many rounds see it, and
// resolves once when it is retried.
func TestAnEpisodeFiresOnceAndResolvesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	a := e.alerter(t, alert.WithRules(alert.Dead()))
	id := e.enqueue(t)
	run(t, a)
	require.Empty(t, e.sink.types())

	e.fail(t, id, "county Kent: upstream returned 503")
	run(t, a)
	run(t, a)
	key := fmt.Sprintf("job %d", id)
	require.Equal(t, []string{"firing " + key}, e.sink.types())
	n := e.sink.notices()[0]
	require.Equal(t, "dead", n.Rule)
	require.Equal(t, "report", n.Kind)
	require.Contains(t, n.Summary, "upstream returned 503")
	require.NotEmpty(t, n.EventID)

	_, err := e.client.Retry(ctx, id)
	require.NoError(t, err)
	run(t, a)
	run(t, a)
	require.Equal(t, []string{"firing " + key, "resolved " + key}, e.sink.types())
	require.NotEqual(t, n.EventID, e.sink.notices()[1].EventID)
	eps := episodes(t, a)
	require.Len(t, eps, 1)
	require.Equal(t, alert.StateResolved, eps[0].State)
	require.NotNil(t, eps[0].ResolvedAt)

	// Failing again is a new episode.
	e.fail(t, id, "again")
	run(t, a)
	require.Len(t, e.sink.types(), 3)
	require.Len(t, episodes(t, a, alert.StateFiring), 1)
}

// A silence mutes an episode while it lasts; when it expires, the episode
// that still fires is announced. One that resolves while muted sends
// nothing. Unsilence ends a silence at once.
func TestSilenceMutesUntilItExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	a := e.alerter(t, alert.WithRules(alert.Dead(), alert.RunFailures(1)))
	_, err := a.Silence(ctx, alert.Silence{Rule: "dead", Kind: "report", Until: e.clock.now().Add(time.Hour), Actor: "ops", Reason: "known"})
	require.NoError(t, err)
	other, err := a.Silence(ctx, alert.Silence{Rule: "run-failures", Queue: "elsewhere", Until: e.clock.now().Add(time.Hour)})
	require.NoError(t, err)
	ss, err := a.Silences(ctx)
	require.NoError(t, err)
	require.Len(t, ss, 2)
	require.Equal(t, "ops", ss[0].Actor)

	id := e.enqueue(t, queue.InRun("night@1"))
	e.fail(t, id, "boom")
	run(t, a)
	// The run's failures are not in the silenced queue; the dead job is muted.
	require.Equal(t, []string{"firing night@1"}, e.sink.types())
	firing := episodes(t, a, alert.StateFiring)
	require.Len(t, firing, 2)
	for _, ep := range firing {
		require.Equal(t, ep.Rule == "run-failures", ep.Notified, ep.Rule)
	}

	e.clock.add(59 * time.Minute)
	run(t, a)
	require.Len(t, e.sink.types(), 1, "still silenced")
	e.clock.add(2 * time.Minute)
	run(t, a)
	require.Equal(t, []string{"firing night@1", fmt.Sprintf("firing job %d", id)}, e.sink.types())

	// Muted, fired and resolved: nothing is sent for it.
	require.NoError(t, a.Unsilence(ctx, other))
	require.ErrorIs(t, a.Unsilence(ctx, other), alert.ErrNotFound)
	_, err = a.Silence(ctx, alert.Silence{Rule: "dead", Until: e.clock.now().Add(time.Hour)})
	require.NoError(t, err)
	id2 := e.enqueue(t)
	e.fail(t, id2, "boom")
	run(t, a)
	_, err = e.client.Retry(ctx, id2)
	require.NoError(t, err)
	run(t, a)
	require.Len(t, e.sink.types(), 2)

	// The episode announced before this silence began announces its end,
	// as does the run's, which no silence covers now.
	_, err = e.client.Retry(ctx, id)
	require.NoError(t, err)
	run(t, a)
	require.Equal(t, []string{fmt.Sprintf("resolved job %d", id), "resolved night@1"}, e.sink.types()[2:])
}

// A new Alerter on the same database carries on: it neither announces
// again what was sent nor loses what was recorded and not yet sent.
func TestARestartNeitherLosesNorRepeats(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.alerter(t, alert.WithRules(alert.Dead()))
	id1, id2 := e.enqueue(t), e.enqueue(t)
	e.fail(t, id1, "one")
	run(t, first)
	require.Len(t, e.sink.types(), 1)

	// The second's notice is recorded, and its send fails: the process
	// stops there.
	e.sink.fail = 1
	e.fail(t, id2, "two")
	_, err := first.Run(context.Background())
	require.ErrorContains(t, err, "receiver down")
	require.Len(t, e.sink.types(), 1)

	second := e.alerter(t, alert.WithRules(alert.Dead()))
	e.clock.add(alert.DefaultRetryBackoff)
	run(t, second)
	run(t, second)
	require.Equal(t, []string{fmt.Sprintf("firing job %d", id1), fmt.Sprintf("firing job %d", id2)}, e.sink.types())
	require.Len(t, episodes(t, second), 2)

	// A notice taken but not known to be (the process died before it
	// marked it sent) goes again, under the same event ID.
	e.sink.lose = 1
	id3 := e.enqueue(t)
	e.fail(t, id3, "three")
	_, err = second.Run(context.Background())
	require.Error(t, err)
	third := e.alerter(t, alert.WithRules(alert.Dead()))
	e.clock.add(alert.DefaultRetryBackoff)
	run(t, third)
	got := e.sink.notices()
	require.Len(t, got, 4)
	require.Equal(t, got[2].EventID, got[3].EventID)
	require.Equal(t, fmt.Sprintf("job %d", id3), got[3].Key)
}

// A sink that fails is tried again after a backoff that doubles, under
// the same event ID, until it takes the notice; Run asks to be run again
// when the retry is due.
func TestAFailingSinkIsRetriedAndNothingIsLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	other := &recorder{}
	a := e.alerter(t, alert.WithRules(alert.Dead()), alert.WithRetryBackoff(10*time.Second, time.Minute), alert.WithSink("other", other))
	e.sink.fail = 3
	id := e.enqueue(t)
	e.fail(t, id, "boom")
	next, err := a.Run(context.Background())
	require.ErrorContains(t, err, `sink "test": receiver down`)
	require.LessOrEqual(t, next, 10*time.Second)
	require.Len(t, other.notices(), 1, "a failing sink does not hold the others back")

	for _, wait := range []time.Duration{10 * time.Second, 20 * time.Second} {
		e.clock.add(wait)
		_, err = a.Run(context.Background())
		require.Error(t, err) // the second and third failures, at 10s and 30s
	}
	run(t, a) // not yet due
	require.Empty(t, e.sink.notices())
	e.clock.add(40 * time.Second)
	run(t, a)
	require.Len(t, e.sink.notices(), 1)
	require.Equal(t, 3, e.sink.failed)
	require.Equal(t, other.notices()[0].EventID, e.sink.notices()[0].EventID)
	e.clock.add(time.Hour)
	run(t, a)
	require.Len(t, e.sink.notices(), 1)
}

// Two Alerters on one database that run at once record each episode once
// and send each notice once.
func TestTwoAlertersSendEachNoticeOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alerters := []*alert.Alerter{e.alerter(t, alert.WithRules(alert.Dead())), e.alerter(t, alert.WithRules(alert.Dead()))}
	for i := range 5 {
		e.fail(t, e.enqueue(t), fmt.Sprintf("boom %d", i))
	}
	var wg sync.WaitGroup
	for _, a := range alerters {
		for range 3 {
			wg.Go(func() {
				_, err := a.Run(context.Background())
				require.NoError(t, err)
			})
		}
	}
	wg.Wait()
	run(t, alerters[0])
	require.Len(t, e.sink.notices(), 5)
	require.Len(t, episodes(t, alerters[0]), 5)
}

// A condition that must hold for a while fires only once it has: a queue
// deep for less than the time given does not fire.
func TestQueueDepthFiresAfterHoldingForItsTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	a := e.alerter(t, alert.WithRules(alert.QueueDepth(2, 10*time.Minute)))
	e.enqueue(t)
	id := e.enqueue(t)
	run(t, a)
	require.Len(t, episodes(t, a, alert.StatePending), 1)
	e.clock.add(5 * time.Minute)
	run(t, a)
	require.Empty(t, e.sink.types())

	// It drops below, and comes back: the wait starts over.
	_, err := e.client.Cancel(ctx, id)
	require.NoError(t, err)
	run(t, a)
	require.Empty(t, episodes(t, a, alert.StatePending))
	e.enqueue(t)
	run(t, a)
	e.clock.add(9 * time.Minute)
	run(t, a)
	require.Empty(t, e.sink.types())
	e.clock.add(time.Minute)
	run(t, a)
	require.Equal(t, []string{"firing default"}, e.sink.types())
	require.Contains(t, e.sink.notices()[0].Summary, "holds 2 queued jobs")
}

// The other conditions, each from a state that fires it.
func TestConditions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		rule  alert.Rule
		setup func(t *testing.T, e *env)
		want  []string // types and keys
		text  string   // in the first notice's summary
	}{{
		name: "failures in a run",
		rule: alert.RunFailures(2),
		setup: func(t *testing.T, e *env) {
			e.fail(t, e.enqueue(t, queue.InRun("night@2")), "a")
			e.fail(t, e.enqueue(t, queue.InRun("night@2")), "b")
			e.fail(t, e.enqueue(t, queue.InRun("night@3")), "c")
			e.enqueue(t, queue.InRun("night@2"))
		},
		want: []string{"firing night@2"},
		text: "2 of 3 jobs failed",
	}, {
		name: "error groups in a run",
		rule: alert.NewErrorGroup(),
		setup: func(t *testing.T, e *env) {
			e.fail(t, e.enqueue(t, queue.InRun("night@4")), "request 17 timed out")
			e.fail(t, e.enqueue(t, queue.InRun("night@4")), "request 18 timed out")
			e.fail(t, e.enqueue(t, queue.InRun("night@4")), "disk full")
		},
		want: []string{"firing night@4: request <n> timed out", "firing night@4: disk full"},
		text: "2 failed job(s) of report",
	}, {
		name: "an error group with a long message",
		rule: alert.NewErrorGroup(),
		setup: func(t *testing.T, e *env) {
			e.fail(t, e.enqueue(t, queue.InRun("night@7")), strings.Repeat("é", 3000))
		},
		want: []string{"firing night@7: " + strings.Repeat("é", 100) + "… #" + shapeHash(strings.Repeat("é", 3000))},
		text: "1 failed job(s) of report",
	}, {
		name: "oldest due job",
		rule: alert.OldestDue(time.Minute),
		setup: func(t *testing.T, e *env) {
			id := e.enqueue(t)
			require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET run_at = ? WHERE id = ?", e.db.Time(e.db.Now(t).Add(-time.Hour)), id).Error)
		},
		want: []string{"firing default"},
		text: "the oldest due job has waited 1h",
	}, {
		name: "a run late at its deadline",
		rule: alert.RunDeadline("05:00", time.UTC),
		setup: func(t *testing.T, e *env) {
			id := e.enqueue(t, queue.InRun("night@5"))
			// Created before the latest 05:00, and still queued.
			now := e.db.Now(t).UTC()
			at := time.Date(now.Year(), now.Month(), now.Day(), 5, 0, 0, 0, time.UTC)
			if at.After(now) {
				at = at.AddDate(0, 0, -1)
			}
			require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET created_at = ? WHERE id = ?", e.db.Time(at.Add(-time.Hour)), id).Error)
			require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_runs SET first_created = ? WHERE run_id = 'night@5'", e.db.Time(at.Add(-time.Hour))).Error)
			e.enqueue(t, queue.InRun("night@6")) // created after it
		},
		want: []string{"firing night@5"},
		text: "has not finished by",
	}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			a := e.alerter(t, alert.WithRules(c.rule))
			c.setup(t, e)
			run(t, a)
			run(t, a)
			require.ElementsMatch(t, c.want, e.sink.types())
			require.Contains(t, e.sink.notices()[0].Summary, c.text)
		})
	}
}

// A schedule whose ticks were due and did not fire raises an alert.
func TestMissedTick(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	reg := queue.NewRegistry()
	require.NoError(t, queue.Register(reg, queue.HandlerFunc[report](func(context.Context, *queue.Job[report]) error { return nil })))
	require.NoError(t, reg.Schedule(queue.Periodic{Name: "hourly", Spec: queue.Cron("0 * * * *"),
		Jobs: func(queue.Tick) []queue.Params { return []queue.Params{{Args: report{}}} }}))
	c, err := queue.NewClient(e.db.Gorm, reg, queue.WithLogger(quiet()))
	require.NoError(t, err)
	// Its last tick was three hours ago.
	last := e.db.Now(t).UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	require.NoError(t, e.db.Gorm.Exec("INSERT INTO sheaf_schedules (name, last_tick) VALUES (?, ?)", "hourly", e.db.Time(last)).Error)
	a, err := alert.New(c, alert.WithClock(e.clock.now), alert.WithLogger(quiet()), alert.WithSink("test", e.sink),
		alert.WithRules(alert.MissedTick()))
	require.NoError(t, err)
	_, err = a.Run(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"firing hourly"}, e.sink.types())
	require.Contains(t, e.sink.notices()[0].Summary, "missed")
}

// The digest is sent once a day, at its time, with the night's review.
func TestDigestIsSentOnceADay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := e.clock.now().UTC()
	at := now.Add(time.Minute).Format("15:04")
	a := e.alerter(t, alert.WithDigest(at, time.UTC))
	e.fail(t, e.enqueue(t), "county Kent: boom")
	e.enqueue(t)
	run(t, a)
	require.Empty(t, e.sink.notices(), "not yet its time")
	e.clock.add(2 * time.Minute)
	run(t, a)
	run(t, e.alerter(t, alert.WithDigest(at, time.UTC)))
	got := e.sink.notices()
	require.Len(t, got, 1)
	require.Equal(t, alert.TypeDigest, got[0].Type)
	require.Contains(t, got[0].Summary, "2 jobs, 1 failed")
	require.Contains(t, got[0].Text, "county Kent: boom")
	require.Equal(t, now.Add(time.Minute).Format("2006-01-02"), got[0].Key)
	require.Len(t, episodes(t, a, alert.StateDigest), 1)
}

// Bad options and arguments get typed errors.
func TestInvalidInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		name string
		opts []alert.Option
		want string
	}{
		{"nil rule", []alert.Option{alert.WithRules(nil)}, "nil rule"},
		{"twice one name", []alert.Option{alert.WithRules(alert.Dead(), alert.Dead())}, `two rules named "dead"`},
		{"empty name", []alert.Option{alert.WithRules(alert.Dead().Named(""))}, "rule name"},
		{"the digest's name", []alert.Option{alert.WithRules(alert.Dead().Named("digest"))}, "is the digest's"},
		{"no failures", []alert.Option{alert.WithRules(alert.RunFailures(0))}, "at least 1"},
		{"no depth", []alert.Option{alert.WithRules(alert.QueueDepth(0, time.Minute))}, "QueueDepth"},
		{"no age", []alert.Option{alert.WithRules(alert.OldestDue(0))}, "OldestDue"},
		{"bad lookback", []alert.Option{alert.WithRules(alert.Dead().Within(0))}, "lookback"},
		{"bad deadline", []alert.Option{alert.WithRules(alert.RunDeadline("25:00", nil))}, `"25:00" is not hh:mm`},
		{"bad digest", []alert.Option{alert.WithDigest("7am", nil)}, "not hh:mm"},
		{"nil sink", []alert.Option{alert.WithSink("x", nil)}, "nil"},
		{"two sinks", []alert.Option{alert.WithSink("x", e.sink), alert.WithSink("x", e.sink)}, `two sinks named "x"`},
		{"interval", []alert.Option{alert.WithInterval(0)}, "interval"},
		{"backoff", []alert.Option{alert.WithRetryBackoff(time.Minute, time.Second)}, "retry backoff"},
		{"nil clock", []alert.Option{alert.WithClock(nil)}, "nil clock"},
		{"nil option", []alert.Option{nil}, "nil option"},
	} {
		_, err := alert.New(e.client, c.opts...)
		require.ErrorIs(t, err, alert.ErrInvalid, c.name)
		require.ErrorContains(t, err, c.want, c.name)
	}
	_, err := alert.New(nil)
	require.ErrorIs(t, err, alert.ErrInvalid)

	a := e.alerter(t)
	ctx := context.Background()
	_, err = a.Silence(ctx, alert.Silence{Until: e.clock.now().Add(time.Hour)})
	require.ErrorIs(t, err, alert.ErrInvalid)
	_, err = a.Silence(ctx, alert.Silence{Rule: "dead", Until: e.clock.now()})
	require.ErrorContains(t, err, "not in the future")
	_, err = a.Silence(ctx, alert.Silence{Rule: "dead\x00", Until: e.clock.now().Add(time.Hour)})
	require.ErrorIs(t, err, alert.ErrInvalid)
	_, err = a.Episodes(ctx, alert.EpisodeQuery{Limit: 1001})
	require.ErrorIs(t, err, alert.ErrInvalid)
	_, err = a.Episodes(ctx, alert.EpisodeQuery{States: []string{"open"}})
	require.ErrorIs(t, err, alert.ErrInvalid)
	require.Equal(t, "alerts", a.Name())
}

// A rule whose read fails leaves its episodes as they are and the round
// reports it; the other rules go on.
func TestAFailingRuleLeavesItsEpisodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.alerter(t, alert.WithRules(alert.Dead()))
	e.fail(t, e.enqueue(t), "boom")
	run(t, a)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := a.Run(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, episodes(t, a, alert.StateFiring), 1)
	require.Len(t, e.sink.types(), 1)
}

// A kind whose p95 today is well above its usual (the median of its daily
// p95 over the days before) fires; one as fast as usual does not, nor one
// with too little history.
func TestSlowKind(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := e.db.Now(t).UTC()
	complete := func(queueName string, at time.Time, took time.Duration) {
		id := e.enqueue(t, queue.OnQueue(queueName))
		require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET status = 'COMPLETED', attempts = 1, claims = 1, started_at = ?, completed_at = ? WHERE id = ?",
			e.db.Time(at.Add(-took)), e.db.Time(at), id).Error)
	}
	for day := 1; day <= 4; day++ {
		for range 3 {
			complete("slow", now.AddDate(0, 0, -day), 10*time.Second)
			complete("steady", now.AddDate(0, 0, -day), 10*time.Second)
		}
	}
	for range 5 {
		complete("slow", now, 40*time.Second)
		complete("steady", now, 11*time.Second)
		complete("new", now, time.Hour)
	}
	a := e.alerter(t, alert.WithRules(alert.SlowKind(2).Days(7)))
	run(t, a)
	require.Equal(t, []string{"firing report on slow"}, e.sink.types())
	require.Contains(t, e.sink.notices()[0].Summary, "p95 today 40s, usually 10s (over 4 days)")

	_, err := alert.New(e.client, alert.WithRules(alert.SlowKind(1)))
	require.ErrorIs(t, err, alert.ErrInvalid)
	_, err = alert.New(e.client, alert.WithRules(alert.SlowKind(2).Days(2)))
	require.ErrorIs(t, err, alert.ErrInvalid)
}

// A dead job's episode stays open while the job is FAILED, even when
// newer failures push it out of the jobs the rule lists each round.
func TestDeadJobBeyondTheNewestStaysFiring(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, err := alert.New(e.client, alert.WithClock(e.clock.now), alert.WithLogger(quiet()), alert.WithRules(alert.ReadAtMost(alert.Dead().Kinds("report"), 3)))
	require.NoError(t, err)
	first := e.enqueue(t)
	e.fail(t, first, "first")
	run(t, a)
	params := make([]queue.Params, 3)
	for i := range params {
		params[i] = queue.Params{Args: report{County: "Kent"}}
	}
	_, err = e.client.EnqueueMany(context.Background(), params)
	require.NoError(t, err)
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET status = 'FAILED', completed_at = ?, last_error = 'later' WHERE id > ?",
		e.db.Time(e.db.Now(t)), first).Error)
	run(t, a)
	require.Len(t, episodes(t, a, alert.StateFiring), 4)
	require.Empty(t, episodes(t, a, alert.StateResolved))

	// Retried, it resolves.
	_, err = e.client.Retry(context.Background(), first)
	require.NoError(t, err)
	run(t, a)
	resolved := episodes(t, a, alert.StateResolved)
	require.Len(t, resolved, 1)
	require.Equal(t, fmt.Sprintf("job %d", first), resolved[0].Key)
}

// shapeHash is the hash a long error shape's key ends with.
func shapeHash(shape string) string {
	sum := sha256.Sum256([]byte(shape))
	return hex.EncodeToString(sum[:4])
}
