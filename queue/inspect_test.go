package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
)

func TestRegistrySchedulesAndPing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	require.Same(t, e.reg, e.client.Registry())
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	require.NoError(t, err)
	jobs := func(queue.Tick) []queue.Params { return nil }
	require.NoError(t, e.reg.Schedule(queue.Periodic{Name: "b-nightly", Spec: queue.Daily(23, 0), Location: kolkata, Jobs: jobs}))
	require.NoError(t, e.reg.Schedule(queue.Periodic{Name: "a-hourly", Spec: queue.Cron("0 * * * *"), Jobs: jobs}))
	got := e.reg.Schedules()
	require.Len(t, got, 2)
	require.Equal(t, "a-hourly", got[0].Name)
	require.Equal(t, time.UTC, got[0].Location, "a schedule without a location runs in UTC")
	require.Equal(t, "b-nightly", got[1].Name)
	require.Equal(t, "0 23 * * *", got[1].Spec.String())
	next, err := got[1].Next(time.Date(2025, 12, 8, 0, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	require.Equal(t, "2025-12-08T23:00:00+05:30", next.Format(time.RFC3339))

	d, err := e.client.Ping(context.Background())
	require.NoError(t, err)
	require.Positive(t, d)
}

func TestChildren(t *testing.T) {
	t.Parallel()
	_, e := newNightly(t)
	ctx := context.Background()
	run := []queue.EnqueueOption{queue.InRun("nightly@2025-12-08"), queue.InPeriod("2025-12-08")}
	a := enqueue(t, e, countyDaily{County: "Travis"}, run...)
	w := enqueue(t, e, weekly{}, run...)
	m := enqueue(t, e, monthly{}, run...)
	lone := enqueue(t, e, countyDaily{County: "Harris"}) // no rule has released anything for it yet
	e.runner(t)
	e.events.Wait(t, queue.EventReleased, 0, 3)
	e.events.Wait(t, queue.EventCompleted, 0, 6)

	kids, err := e.client.Children(ctx, a)
	require.NoError(t, err)
	require.Len(t, kids, 1)
	require.Equal(t, "summary", kids[0].Kind)
	require.Equal(t, queue.IDs{a}, kids[0].ParentIDs)

	kids, err = e.client.Children(ctx, w)
	require.NoError(t, err)
	require.Len(t, kids, 1)
	require.Equal(t, "consolidated", kids[0].Kind)
	require.ElementsMatch(t, []int64{w, m}, []int64(kids[0].ParentIDs))

	kids, err = e.client.Children(ctx, kids[0].ID)
	require.NoError(t, err)
	require.Empty(t, kids, "no rule has consolidated as a parent")
	kids, err = e.client.Children(ctx, lone)
	require.NoError(t, err)
	require.Len(t, kids, 1, "a one-to-one rule needs no period")

	_, err = e.client.Children(ctx, 1<<40)
	require.ErrorIs(t, err, queue.ErrNotFound)
}

func TestRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(r *queue.Registry) {
		require.NoError(t, queue.Register(r, queue.HandlerFunc[noop](func(context.Context, *queue.Job[noop]) error { return nil })))
	})
	ctx := context.Background()
	runs, err := e.client.Runs(ctx, queue.RunsQuery{})
	require.NoError(t, err)
	require.Empty(t, runs)

	for i, run := range []string{"a@1", "b@2", "c@3"} {
		for range i + 1 {
			enqueue(t, e, noop{}, queue.InRun(run), queue.InPeriod("2025-12-0"+string(rune('1'+i%2))))
		}
		time.Sleep(5 * time.Millisecond) // distinct first creations
	}
	enqueue(t, e, noop{}) // in no run
	id := enqueue(t, e, noop{}, queue.InRun("a@1"))
	_, err = e.client.Cancel(ctx, id)
	require.NoError(t, err)

	runs, err = e.client.Runs(ctx, queue.RunsQuery{})
	require.NoError(t, err)
	require.Len(t, runs, 3)
	require.Equal(t, []string{"c@3", "b@2", "a@1"}, []string{runs[0].RunID, runs[1].RunID, runs[2].RunID}, "newest first")
	require.Equal(t, int64(3), runs[0].Total)
	require.Equal(t, "2025-12-01", runs[0].Period)
	a := runs[2]
	require.Equal(t, int64(2), a.Total)
	require.Equal(t, map[queue.Status]int64{queue.StatusQueued: 1, queue.StatusCancelled: 1}, a.Counts)
	require.True(t, a.LastCreated.After(a.FirstCreated))

	page, err := e.client.Runs(ctx, queue.RunsQuery{Limit: 2})
	require.NoError(t, err)
	require.Len(t, page, 2)
	rest, err := e.client.Runs(ctx, queue.RunsQuery{Limit: 2, After: &page[1]})
	require.NoError(t, err)
	require.Len(t, rest, 1)
	require.Equal(t, "a@1", rest[0].RunID)

	byPeriod, err := e.client.Runs(ctx, queue.RunsQuery{Period: "2025-12-02"})
	require.NoError(t, err)
	require.Len(t, byPeriod, 1)
	require.Equal(t, "b@2", byPeriod[0].RunID)

	since, err := e.client.Runs(ctx, queue.RunsQuery{FirstFrom: runs[1].FirstCreated})
	require.NoError(t, err)
	require.Len(t, since, 2)
	before, err := e.client.Runs(ctx, queue.RunsQuery{FirstBefore: runs[1].FirstCreated})
	require.NoError(t, err)
	require.Len(t, before, 1)

	_, err = e.client.Runs(ctx, queue.RunsQuery{Limit: -1})
	require.ErrorIs(t, err, queue.ErrInvalidOption)
	_, err = e.client.Runs(ctx, queue.RunsQuery{Period: "\x00"})
	require.ErrorIs(t, err, queue.ErrInvalidOption)
}

func TestCount(t *testing.T) {
	t.Parallel()
	_, e := newNightly(t)
	ctx := context.Background()
	for _, county := range []string{"Travis", "Harris", "Dallas"} {
		enqueue(t, e, countyDaily{County: county}, queue.InRun("r1"))
	}
	enqueue(t, e, countyDaily{County: "Bexar"})
	for f, want := range map[string]queue.Filter{"run": {RunID: "r1"}, "search": {Search: "harris"}, "all": {}} {
		n, err := e.client.Count(ctx, want)
		require.NoError(t, err, f)
		list, err := e.client.List(ctx, want)
		require.NoError(t, err, f)
		require.EqualValues(t, len(list), n, f)
	}
	n, err := e.client.Count(ctx, queue.Filter{RunID: "r1", Statuses: []queue.Status{queue.StatusFailed}})
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = e.client.Count(ctx, queue.Filter{Queue: "bad\x00queue"})
	require.ErrorIs(t, err, queue.ErrInvalidOption)
}

func TestWindows(t *testing.T) {
	t.Parallel()
	reg := queue.NewRegistry()
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	require.NoError(t, err)
	night, err := queue.DailyWindow("23:00", "05:00", kolkata)
	require.NoError(t, err)
	reg.QueueWindow("exports", night)
	require.NoError(t, queue.Register(reg, queue.HandlerFunc[countyDaily](func(context.Context, *queue.Job[countyDaily]) error { return nil }),
		queue.During(night)))
	got := reg.Windows()
	require.Equal(t, []queue.WindowRule{{Queue: "exports", Window: night}, {Kind: countyDaily{}.Kind(), Window: night}}, got)
	noon := time.Date(2025, 12, 8, 12, 0, 0, 0, kolkata)
	require.False(t, night.Open(noon))
	require.Equal(t, time.Date(2025, 12, 8, 23, 0, 0, 0, kolkata), night.NextOpen(noon))
	require.Empty(t, queue.NewRegistry().Windows())
}
