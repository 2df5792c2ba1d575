package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
)

type countyDaily struct {
	County string `json:"county"`
	Fail   bool   `json:"fail,omitempty"`
}

func (countyDaily) Kind() string { return "county_daily" }

type summary struct {
	County string `json:"county"`
}

func (summary) Kind() string { return "summary" }

type weekly struct{}

func (weekly) Kind() string { return "weekly" }

type monthly struct{}

func (monthly) Kind() string { return "monthly" }

type consolidated struct {
	Parts int `json:"parts"`
}

func (consolidated) Kind() string { return "consolidated" }

// nightly registers the kinds of a nightly run: county reports (which leave
// their record count as output and fail on demand), summaries (1→1),
// weekly and monthly reports and a consolidated report (N→1). hold, if set,
// is called by weekly and monthly before they return.
type nightly struct {
	mu       sync.Mutex
	summOut  map[string][]queue.JobRecord // summary county → its parents
	consolid []int                        // parts seen by consolidated jobs
	hold     func(period string)
}

func (n *nightly) register(t *testing.T) func(*queue.Registry) {
	return func(r *queue.Registry) {
		require.NoError(t, queue.Register(r, queue.HandlerFunc[countyDaily](func(ctx context.Context, j *queue.Job[countyDaily]) error {
			if j.Args.Fail {
				return queue.Permanent(fmt.Errorf("county %s: source unavailable", j.Args.County))
			}
			return j.SetOutput(ctx, map[string]any{"county": j.Args.County, "records": 100})
		})))
		require.NoError(t, queue.Register(r, queue.HandlerFunc[summary](func(ctx context.Context, j *queue.Job[summary]) error {
			parents, err := j.Parents(ctx)
			if err != nil {
				return err
			}
			n.mu.Lock()
			defer n.mu.Unlock()
			n.summOut[j.Args.County] = parents
			return nil
		})))
		parent := func(period string) error {
			if n.hold != nil {
				n.hold(period)
			}
			return nil
		}
		require.NoError(t, queue.Register(r, queue.HandlerFunc[weekly](func(_ context.Context, j *queue.Job[weekly]) error { return parent(j.Period) })))
		require.NoError(t, queue.Register(r, queue.HandlerFunc[monthly](func(_ context.Context, j *queue.Job[monthly]) error { return parent(j.Period) })))
		require.NoError(t, queue.Register(r, queue.HandlerFunc[consolidated](func(_ context.Context, j *queue.Job[consolidated]) error {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.consolid = append(n.consolid, j.Args.Parts)
			return nil
		})))
		require.NoError(t, queue.Depend(r, queue.Rule{Name: "county-summary", Parents: []string{"county_daily"}, Each: true},
			func(parents []queue.JobRecord) (summary, []queue.EnqueueOption) {
				var out struct{ County string }
				_ = json.Unmarshal(parents[0].Output, &out)
				return summary{County: out.County}, []queue.EnqueueOption{queue.Priority(8)}
			}))
		require.NoError(t, queue.Depend(r, queue.Rule{Name: "consolidated", Parents: []string{"weekly", "monthly"}},
			func(parents []queue.JobRecord) (consolidated, []queue.EnqueueOption) {
				return consolidated{Parts: len(parents)}, nil
			}))
	}
}

func newNightly(t *testing.T) (*nightly, *env) {
	n := &nightly{summOut: map[string][]queue.JobRecord{}}
	return n, newEnv(t, n.register(t))
}

func TestOneToOneDependency(t *testing.T) {
	t.Parallel()
	n, e := newNightly(t)
	ctx := context.Background()
	run := []queue.EnqueueOption{queue.InRun("nightly@2025-12-08"), queue.InPeriod("2025-12-08")}
	a := enqueue(t, e, countyDaily{County: "Travis"}, run...)
	b := enqueue(t, e, countyDaily{County: "Harris"}, run...)
	e.runner(t)
	released := e.events.Wait(t, queue.EventReleased, 0, 2)
	summaries := e.events.Wait(t, queue.EventCompleted, 0, 4)
	require.Len(t, summaries, 4)
	for _, ev := range released {
		require.Equal(t, "summary", ev.Kind)
		require.Equal(t, "county-summary", ev.Rule)
		require.Equal(t, "nightly@2025-12-08", ev.RunID)
		require.Equal(t, 8, ev.Priority)
		require.Len(t, ev.ParentIDs, 1)
		child, err := e.client.Get(ctx, ev.JobID)
		require.NoError(t, err)
		require.Equal(t, "nightly@2025-12-08", *child.RunID, "the child joins its parent's run")
		require.Equal(t, "2025-12-08", *child.Period)
		require.Equal(t, 8, child.Priority, "options from the rule's function apply")
		require.Equal(t, queue.IDs(ev.ParentIDs), child.ParentIDs)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	require.Len(t, n.summOut, 2)
	require.Equal(t, a, n.summOut["Travis"][0].ID, "the child reads its parent")
	require.JSONEq(t, `{"county":"Travis","records":100}`, string(n.summOut["Travis"][0].Output))
	require.Equal(t, b, n.summOut["Harris"][0].ID)
	require.Equal(t, int64(2), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE kind = 'summary'"))
}

func TestManyToOneWaitsForEveryParentOfThePeriod(t *testing.T) {
	t.Parallel()
	n, e := newNightly(t)
	w := enqueue(t, e, weekly{}, queue.InPeriod("2025-12-01"), queue.InRun("weekly@2025-12-01"))
	other := enqueue(t, e, monthly{}, queue.InPeriod("2025-11-30")) // another night
	e.runner(t)
	e.events.Wait(t, queue.EventCompleted, w, 1)
	e.events.Wait(t, queue.EventCompleted, other, 1)
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE kind = 'consolidated'"), "the monthly of 12-01 has not run")
	m := enqueue(t, e, monthly{}, queue.InPeriod("2025-12-01"), queue.InRun("monthly@2025-12-01"))
	rel := e.events.Wait(t, queue.EventReleased, 0, 1)[0]
	require.Equal(t, []int64{w, m}, rel.ParentIDs)
	require.Equal(t, "weekly@2025-12-01", rel.RunID, "the first parent's run, though the monthly completed last")
	e.events.Wait(t, queue.EventCompleted, rel.JobID, 1)
	n.mu.Lock()
	defer n.mu.Unlock()
	require.Equal(t, []int{2}, n.consolid)
}

// The two parents of each period complete at the same instant on two
// runners with their own pools; exactly one child per period is released.
func TestConcurrentParentsReleaseOneChild(t *testing.T) {
	t.Parallel()
	const periods = 12
	n, e := newNightly(t)
	// The weekly and monthly of a period wait for each other, so they run,
	// and their completions are written, at the same time on two runners.
	barriers := map[string]*sync.WaitGroup{}
	for i := range periods {
		wg := &sync.WaitGroup{}
		wg.Add(2)
		barriers[fmt.Sprintf("2025-12-%02d", i+1)] = wg
	}
	n.hold = func(period string) {
		barriers[period].Done()
		barriers[period].Wait()
	}
	for i := range periods {
		p := fmt.Sprintf("2025-12-%02d", i+1)
		enqueue(t, e, weekly{}, queue.InPeriod(p))
		enqueue(t, e, monthly{}, queue.InPeriod(p))
	}
	for i := range 2 {
		c, err := queue.NewClient(ownPool(t, e), e.reg, quiet(), queue.WithObserver(e.events))
		require.NoError(t, err)
		// One job at a time each: a pair can only meet across the two.
		r, err := queue.NewRunner(c, queue.WithWorkers(1), queue.WithRunnerID(fmt.Sprint("r", i)))
		require.NoError(t, err)
		require.NoError(t, r.Start(context.Background()))
		t.Cleanup(func() { require.NoError(t, r.Stop(context.Background())) })
	}
	e.events.Wait(t, queue.EventReleased, 0, periods)
	e.events.Wait(t, queue.EventCompleted, 0, 3*periods)
	require.Equal(t, int64(periods), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE kind = 'consolidated'"))
	require.Equal(t, int64(periods), e.db.Count(t, "SELECT count(DISTINCT period) FROM sheaf_jobs WHERE kind = 'consolidated'"))
}

func TestFailedParentBlocksUntilRetriedCancelledParentBlocks(t *testing.T) {
	t.Parallel()
	_, e := newNightly(t)
	ctx := context.Background()
	bad := enqueue(t, e, countyDaily{County: "Bexar", Fail: true})
	e.runner(t)
	e.events.Wait(t, queue.EventFailed, bad, 1)
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE kind = 'summary'"), "a failed parent releases nothing")

	// Fix the cause and retry: the child is released then.
	require.NoError(t, e.db.Gorm.Exec(`UPDATE sheaf_jobs SET payload = '{"county":"Bexar"}' WHERE id = ?`, bad).Error)
	_, err := e.client.Retry(ctx, bad)
	require.NoError(t, err)
	rel := e.events.Wait(t, queue.EventReleased, 0, 1)[0]
	require.Equal(t, []int64{bad}, rel.ParentIDs)

	// A many-to-one rule with a cancelled parent waits for ever (until the
	// parent is retried).
	w := enqueue(t, e, weekly{}, queue.InPeriod("2025-12-01"), queue.After(3600e9))
	_, err = e.client.Cancel(ctx, w)
	require.NoError(t, err)
	m := enqueue(t, e, monthly{}, queue.InPeriod("2025-12-01"))
	e.events.Wait(t, queue.EventCompleted, m, 1)
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE kind = 'consolidated'"))
	_, err = e.client.Retry(ctx, w)
	require.NoError(t, err)
	e.events.Wait(t, queue.EventReleased, 0, 2)
	require.Equal(t, int64(1), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE kind = 'consolidated'"))
}

func TestRulesAreChecked(t *testing.T) {
	t.Parallel()
	r := queue.NewRegistry()
	require.NoError(t, queue.Register(r, nopHandler[weekly]()))
	require.NoError(t, queue.Register(r, nopHandler[monthly]()))
	require.NoError(t, queue.Register(r, nopHandler[consolidated]()))
	build := func([]queue.JobRecord) (consolidated, []queue.EnqueueOption) { return consolidated{}, nil }
	toWeekly := func([]queue.JobRecord) (weekly, []queue.EnqueueOption) { return weekly{}, nil }
	require.NoError(t, queue.Depend(r, queue.Rule{Name: "c", Parents: []string{"weekly", "monthly"}}, build))
	for name, err := range map[string]error{
		"no name":       queue.Depend(r, queue.Rule{Parents: []string{"weekly"}}, build),
		"no parents":    queue.Depend(r, queue.Rule{Name: "x"}, build),
		"each of two":   queue.Depend(r, queue.Rule{Name: "x", Parents: []string{"weekly", "monthly"}, Each: true}, build),
		"unknown":       queue.Depend(r, queue.Rule{Name: "x", Parents: []string{"yearly"}}, build),
		"same name":     queue.Depend(r, queue.Rule{Name: "c", Parents: []string{"weekly"}}, build),
		"self":          queue.Depend(r, queue.Rule{Name: "x", Parents: []string{"weekly"}}, toWeekly),
		"cycle":         queue.Depend(r, queue.Rule{Name: "x", Parents: []string{"consolidated"}}, toWeekly),
		"nil function":  queue.Depend[weekly](r, queue.Rule{Name: "x", Parents: []string{"monthly"}}, nil),
		"unknown child": queue.Depend(r, queue.Rule{Name: "x", Parents: []string{"monthly"}}, func([]queue.JobRecord) (summary, []queue.EnqueueOption) { return summary{}, nil }),
	} {
		require.ErrorIs(t, err, queue.ErrInvalidOption, name)
	}
	require.ErrorContains(t, queue.Depend(r, queue.Rule{Name: "x", Parents: []string{"consolidated"}}, toWeekly), "cycle")
}

// The race made certain: both parents' completion statements are held at a
// gate inside their transactions until both are there, then let go
// together, so each checks its sibling while the other's completion is not
// yet committed. Without the rule's lock neither would release the child.
func TestConcurrentParentsAtAGate(t *testing.T) {
	pgtest.PostgresOnly(t, "a PL/pgSQL trigger holds parents at a gate")
	t.Parallel()
	n, e := newNightly(t)
	ctx := context.Background()
	// The two run at the same time, so each runner (one worker) has one.
	var started sync.WaitGroup
	started.Add(2)
	n.hold = func(string) { started.Done(); started.Wait() }
	gate := e.db.Schema + ".gate"
	require.NoError(t, e.db.Gorm.Exec(`CREATE FUNCTION hold_at_gate() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock_shared(hashtext('`+gate+`')); RETURN NEW; END $$`).Error)
	require.NoError(t, e.db.Gorm.Exec(`CREATE TRIGGER gate AFTER UPDATE OF status ON sheaf_jobs FOR EACH ROW
		WHEN (NEW.status = 'COMPLETED' AND NEW.kind IN ('weekly', 'monthly')) EXECUTE FUNCTION hold_at_gate()`).Error)
	keeper, err := e.db.SQL.Conn(ctx)
	require.NoError(t, err)
	defer keeper.Close()
	_, err = keeper.ExecContext(ctx, "SELECT pg_advisory_lock(hashtext($1))", gate)
	require.NoError(t, err)

	enqueue(t, e, weekly{}, queue.InPeriod("2025-12-01"))
	enqueue(t, e, monthly{}, queue.InPeriod("2025-12-01"))
	for i := range 2 {
		c, err := queue.NewClient(ownPool(t, e), e.reg, quiet(), queue.WithObserver(e.events))
		require.NoError(t, err)
		r, err := queue.NewRunner(c, queue.WithWorkers(1), queue.WithRunnerID(fmt.Sprint("gate-", i)))
		require.NoError(t, err)
		require.NoError(t, r.Start(ctx))
		t.Cleanup(func() { require.NoError(t, r.Stop(ctx)) })
	}
	// Both completions wait at the gate: watch the server's lock table for
	// them, then open it.
	for e.db.Count(t, "SELECT count(*) FROM pg_locks, pg_sleep(0.005) WHERE locktype = 'advisory' AND NOT granted AND objid = hashtext(?)::oid", gate) < 2 {
	}
	_, err = keeper.ExecContext(ctx, "SELECT pg_advisory_unlock(hashtext($1))", gate)
	require.NoError(t, err)
	e.events.Wait(t, queue.EventReleased, 0, 1)
	e.events.Wait(t, queue.EventCompleted, 0, 3)
	require.Equal(t, int64(1), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE kind = 'consolidated'"))
}

type fragile struct{}

func (fragile) Kind() string { return "fragile" }

// A rule whose function panics does not make its parent fail: the parent
// completes, no child is released, and the review shows the chain stopped
// with every parent complete.
func TestRuleFunctionPanic(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(r *queue.Registry) {
		require.NoError(t, queue.Register(r, nopHandler[weekly]()))
		require.NoError(t, queue.Register(r, nopHandler[fragile]()))
		require.NoError(t, queue.Depend(r, queue.Rule{Name: "fragile", Parents: []string{"weekly"}, Each: true},
			func([]queue.JobRecord) (fragile, []queue.EnqueueOption) { panic("bad rule") }))
	})
	id := enqueue(t, e, weekly{}, queue.InRun("r1"))
	e.runner(t)
	done := e.events.Wait(t, queue.EventCompleted, id, 1)[0]
	require.Equal(t, 1, done.Attempt, "completed at once, not re-run")
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE kind = 'fragile'"))
	rv, err := e.client.Review(context.Background(), queue.ReviewQuery{RunID: "r1"})
	require.NoError(t, err)
	require.Len(t, rv.Stopped, 1)
	require.Empty(t, rv.Stopped[0].Blocking)
	require.Empty(t, rv.Stopped[0].MissingKinds)
}
