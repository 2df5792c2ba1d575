package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/console"
	"github.com/sheaf-dev/sheaf/queue/internal/queuetest"
)

// stoppedClock is a Clock that stays at one time.
type stoppedClock struct{ at time.Time }

func (c stoppedClock) Now() time.Time                     { return c.at }
func (stoppedClock) After(time.Duration) <-chan time.Time { return nil } // never

// The schedules page goes by the client's clock, as the runners do: the
// next ticks follow the clock's now, not the machine's, and the last tick,
// read from the ledger, links to its run.
func TestSchedulesGoByTheClientsClock(t *testing.T) {
	t.Parallel()
	db, reg, _ := newClient(t)
	require.NoError(t, reg.Schedule(queue.Periodic{Name: "nightly", Spec: queue.Daily(23, 0),
		Jobs: func(queue.Tick) []queue.Params { return []queue.Params{{Args: report{County: "Travis"}}} }}))
	clock := stoppedClock{time.Date(2025, 12, 8, 23, 0, 5, 0, time.UTC)} // a first start, 5 s after the tick
	events := queuetest.NewEvents()
	c, err := queue.NewClient(db.Gorm, reg, queue.WithLogger(quiet()), queue.WithClock(clock), queue.WithObserver(events))
	require.NoError(t, err)
	h, err := console.New(c, console.WithLogger(quiet()), console.WithCountsCache(0))
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &env{db: db, reg: reg, client: c, srv: srv, h: h}
	queuetest.StartRunner(t, c, queue.WithPollInterval(20*time.Millisecond))
	events.Wait(t, queue.EventScheduled, 0, 1)

	var sc struct {
		Schedules []struct {
			LastTick  *time.Time `json:"last_tick"`
			LastRunID string     `json:"last_run_id"`
			Next      []time.Time
		}
	}
	res := e.do(t, "GET", "/api/schedules", "")
	require.Equal(t, http.StatusOK, res.status)
	res.decode(t, &sc)
	require.Len(t, sc.Schedules, 1)
	s := sc.Schedules[0]
	require.NotNil(t, s.LastTick)
	require.True(t, s.LastTick.Equal(time.Date(2025, 12, 8, 23, 0, 0, 0, time.UTC)), "last tick %v", s.LastTick)
	require.Equal(t, "nightly@2025-12-08T23:00:00Z", s.LastRunID)
	require.True(t, s.Next[0].Equal(time.Date(2025, 12, 9, 23, 0, 0, 0, time.UTC)), "next %v, by the client's clock", s.Next[0])

	page := string(e.do(t, "GET", "/schedules", "").body)
	require.Contains(t, page, `href="runs/`+url.PathEscape("nightly@2025-12-08T23:00:00Z")+`"`, "the last tick links to its run")
	require.Equal(t, http.StatusOK, e.do(t, "GET", "/runs/"+url.PathEscape(s.LastRunID), "").status)
	rs, err := c.Runs(context.Background(), queue.RunsQuery{})
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.Equal(t, s.LastRunID, rs[0].RunID, "the run the page links to is the one Runs lists")
}
