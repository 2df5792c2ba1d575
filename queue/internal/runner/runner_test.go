package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testexit.M(m), testexit.Option()) }

// The sentinels a test runner hands out, standing in for package queue's.
var (
	errStarted   = errors.New("started")
	errStopping  = errors.New("stopping")
	errCancelled = errors.New("cancelled")
	errLeaseLost = errors.New("lease lost")
	errTimeout   = errors.New("timeout")
	errUnknown   = errors.New("unknown kind")
)

type permanent struct{ error }

func isPermanent(err error) bool { var p permanent; return errors.As(err, &p) }

// constant waits the same before every attempt.
type constant time.Duration

func (c constant) Delay(int) time.Duration { return time.Duration(c) }

// panicky is a Backoff of the user's that panics.
type panicky struct{}

func (panicky) Delay(int) time.Duration { panic("backoff") }

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// kinds is a registry of handlers by kind, without windows.
type kinds map[string]*Kind

func (k kinds) Lookup(kind string) (*Kind, error) {
	if e := k[kind]; e != nil {
		return e, nil
	}
	return nil, fmt.Errorf("%w %q", errUnknown, kind)
}
func (kinds) Closed(time.Time, []string) (map[string]bool, []string) { return map[string]bool{}, nil }
func (kinds) NextOpening(time.Time, []string) time.Time              { return time.Time{} }

// noRules has no dependency rules.
type noRules struct{}

func (noRules) For(string) []Rule { return nil }
func (noRules) Child(*gorm.DB, *Execution, Release) (*store.NewJob, error) {
	panic("runner: Child called for a kind that is no parent")
}

// oneRule releases a job of kind "child" for each job of kind "parent", in
// the child's run and period, and records the releases it was asked for.
type oneRule struct{ asked chan Release }

func (oneRule) For(kind string) []Rule {
	if kind == "parent" {
		return []Rule{{Name: "each", Parents: []string{"parent"}, Each: true}}
	}
	return nil
}

func (o oneRule) Child(_ *gorm.DB, _ *Execution, rel Release) (*store.NewJob, error) {
	o.asked <- rel
	return &store.NewJob{Kind: "child", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`, Key: &rel.Key}, nil
}

func config(k Kinds) Config {
	return Config{
		ID: "test-runner", Workers: 2, Queues: []string{"q"}, Poll: 50 * time.Millisecond, Lease: 30 * time.Second,
		RescueEvery: time.Minute, Clock: systemClock{}, Log: slog.New(slog.DiscardHandler),
		Kinds: k, Rules: noRules{}, Observe: func(Event) {}, Preflight: func(context.Context) (int, error) { return 1 << 20, nil },
		DefaultBackoff: constant(time.Hour), DecodeBackoff: func([]byte) (Backoff, error) { return constant(time.Minute), nil },
		Errors: Errors{Started: errStarted, Stopping: errStopping, Cancelled: errCancelled, LeaseLost: errLeaseLost,
			Timeout: errTimeout, Permanent: isPermanent},
	}
}

// The bookkeeping bounds follow the lease within their limits, so that a
// renewal can be tried several times within one lease.
func TestTimeouts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lease                      time.Duration
		statement, renew, retryMax time.Duration
	}{
		{time.Second, minStatementTimeout, 500 * time.Millisecond, 100 * time.Millisecond},
		{30 * time.Second, 5 * time.Second, 3 * time.Second, 3 * time.Second},
		{time.Hour, maxStatementTimeout, maxStatementTimeout, 6 * time.Minute},
	} {
		to := newTimeouts(tc.lease)
		require.Equal(t, tc.statement, to.statement, "lease %v", tc.lease)
		require.Equal(t, tc.renew, to.renew, "lease %v", tc.lease)
		require.Equal(t, tc.retryMax, to.retryMax, "lease %v", tc.lease)
		require.Less(t, 5*to.renewPause, tc.lease, "lease %v", tc.lease)
	}
}

func TestParseNotice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		payload  string
		queue    string
		priority int
		suspects bool
	}{
		{"q:7", "q", 7, false},
		{"q:s", "q", 0, true},
		{"q", "q", maxPriority, false},
		{"a:b:3", "a:b", 3, false},
		{"q:x", "q:x", maxPriority, false},
	} {
		q, p, s := parseNotice(tc.payload)
		require.Equal(t, tc.queue, q, tc.payload)
		require.Equal(t, tc.priority, p, tc.payload)
		require.Equal(t, tc.suspects, s, tc.payload)
	}
}

// The claim-ahead grows with how many jobs finish during a claim, up to as
// many again as there are workers, however slow the claims; behind a far
// server, with what they finish in a round trip; a serial runner claims
// nothing ahead.
func TestCapacity(t *testing.T) {
	t.Parallel()
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		workers              int
		job, claim, rtt, out int64
	}{
		{4, 0, 0, 0, 4},              // nothing measured yet
		{1, 1, 100, 0, 1},            // serial
		{4, 100, 50, 0, 6},           // two jobs finish per claim
		{4, 100, 10_000, 0, 8},       // at most as many again
		{4, 100, 50 * ms, 2 * ms, 8}, // a slow claim from a nearby server: the same
		{4, 10_000, 1, 0, 4},         // long jobs: nothing ahead
		{4, 100, 60 * ms, 50 * ms, 4 + 4*50*ms/int64(minJob)}, // far: jobs count as minJob
		{4, 10 * ms, 60 * ms, 50 * ms, 4 + 20},
		{4, 100, 2000 * ms, 1000 * ms, 4 + 4*maxAhead},
		{4, 100 * ms, 60 * ms, 50 * ms, 4 + 2}, // far, long jobs: as from nearby
	} {
		r := New(Config{Workers: tc.workers})
		r.jobNanos.Store(tc.job)
		r.claimNanos.Store(tc.claim)
		r.rttNanos.Store(tc.rtt)
		require.Equal(t, tc.out, int64(r.capacity()), "%+v", tc)
	}
}

// A claim from a nearby server asks for the free slots; behind a far one,
// for as many more as the workers will finish of the jobs held while it
// travels; and a job claimed ahead may wait about two claims' time for a
// worker.
func TestPipelined(t *testing.T) {
	t.Parallel()
	r := New(Config{Workers: 4})
	r.jobNanos.Store(100)
	r.claimNanos.Store(int64(60 * time.Millisecond))
	r.rttNanos.Store(int64(time.Millisecond))
	for range 10 {
		r.running[&Execution{}] = struct{}{}
	}
	require.Zero(t, r.pipelined(), "nearby, though the claims are slow")
	require.Equal(t, claimAheadWait+120*time.Millisecond, r.aheadWait())
	r.rttNanos.Store(int64(50 * time.Millisecond))
	require.Equal(t, 10, r.pipelined(), "no more than the runner holds")
	for range 1000 {
		r.running[&Execution{}] = struct{}{}
	}
	require.Equal(t, 4*int(50*time.Millisecond/minJob), r.pipelined(), "what the workers finish in a round trip")
}

// A finished attempt's result: completed, failed for good (a permanent
// error, or the last attempt), or queued again after the job's backoff,
// its kind's, or the default's when the job's panics.
func TestResultOf(t *testing.T) {
	t.Parallel()
	cfg := config(kinds{})
	cfg.DecodeBackoff = func(b []byte) (Backoff, error) {
		switch string(b) {
		case "panics":
			return panicky{}, nil
		case "minute":
			return constant(time.Minute), nil
		}
		return nil, errors.New("does not decode")
	}
	r := New(cfg)
	kind := &Kind{Backoff: constant(time.Second)}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name        string
		attempts    int
		own         string
		e           *Kind
		err         error
		status      string
		delay       time.Duration
		description string
	}{
		{name: "success", attempts: 1, e: kind, status: statusCompleted},
		{name: "permanent", attempts: 1, e: kind, err: permanent{boom}, status: statusFailed},
		{name: "last attempt", attempts: 3, e: kind, err: boom, status: statusFailed},
		{name: "kind's backoff", attempts: 1, e: kind, err: boom, status: statusQueued, delay: time.Second},
		{name: "job's own backoff", attempts: 1, e: kind, own: "minute", err: boom, status: statusQueued, delay: time.Minute},
		{name: "own backoff that does not decode", attempts: 1, e: kind, own: "?", err: boom, status: statusQueued, delay: time.Second},
		{name: "own backoff that panics", attempts: 1, e: kind, own: "panics", err: boom, status: statusQueued, delay: time.Hour},
		{name: "unknown kind", attempts: 1, err: boom, status: statusQueued, delay: time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := &Execution{row: Row{ID: 1, Kind: "k", Attempts: tc.attempts, MaxAttempts: 3, backoffJSON: []byte(tc.own)}}
			res := r.resultOf(ex, tc.e, tc.err, time.Millisecond)
			require.Equal(t, tc.status, res.status)
			require.Equal(t, tc.delay, res.delay)
		})
	}
}

// newStore returns a migrated store on a fresh database of this run's
// store (PostgreSQL, or SQLite with SHEAF_TEST_STORE=sqlite).
func newStore(t *testing.T) (store.Store, *gorm.DB) {
	t.Helper()
	db := pgtest.NewMigratedDB(t, "queue", migrate).Gorm
	st, err := store.Open(db)
	require.NoError(t, err)
	return st, db
}

// migrate is the store's Migrate, for pgtest.NewMigratedDB.
func migrate(db *gorm.DB) error {
	st, err := store.Open(db)
	if err == nil {
		_, err = st.Migrate(context.Background())
	}
	return err
}

type inserted struct {
	ID int64
}

func (inserted) TableName() string { return store.JobsTable }

func insert(t *testing.T, st store.Store, db *gorm.DB, jobs ...store.NewJob) []int64 {
	t.Helper()
	var out []inserted
	require.NoError(t, st.Insert(context.Background(), db, jobs, &out))
	ids := make([]int64, len(out))
	for i, o := range out {
		ids[i] = o.ID
	}
	return ids
}

// events collects what a runner observes.
func events(cfg *Config) <-chan Event {
	ch := make(chan Event, 100)
	cfg.Observe = func(e Event) { ch <- e }
	return ch
}

// collect waits until each job in want has had its number of events, and
// returns them by job.
func collect(t *testing.T, ch <-chan Event, want map[int64]int) map[int64][]Event {
	t.Helper()
	got := map[int64][]Event{}
	timeout := time.After(30 * time.Second)
	for id, n := range want {
		for len(got[id]) < n {
			select {
			case e := <-ch:
				got[e.JobID] = append(got[e.JobID], e)
			case <-timeout:
				t.Fatalf("job %d: got events %v, want %d", id, got[id], n)
			}
		}
	}
	return got
}

// startOne starts a runner on cfg with one job of kind waiting, and
// returns once the job's handler has closed started.
func startOne(t *testing.T, cfg Config, st store.Store, db *gorm.DB, kind string, started <-chan struct{}) (*Runner, <-chan Event, int64) {
	t.Helper()
	cfg.Store, cfg.DB = st, db
	ch := events(&cfg)
	id := insert(t, st, db, store.NewJob{Kind: kind, Queue: "q", Priority: 5, Attempts: 3, Payload: `{}`})[0]
	r := New(cfg)
	require.NoError(t, r.Start(context.Background()))
	<-started
	return r, ch, id
}

// requireStatus asserts that job id is in status want.
func requireStatus(t *testing.T, st store.Store, id int64, want string) {
	t.Helper()
	status, _, err := st.State(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, want, status, "job %d", id)
}

func stop(t *testing.T, r *Runner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, r.Stop(ctx))
	<-r.Done()
}

// A job's way through the runner with package queue replaced by the
// Config's seams: the handler reaches its attempt through the Execution,
// a failure is retried by the kind's backoff, and an unknown kind fails
// its attempt.
func TestRunsJobsThroughTheSeams(t *testing.T) {
	t.Parallel()
	st, db := newStore(t)
	type seen struct {
		row      Row
		progress error
	}
	handled := make(chan seen, 10)
	k := kinds{
		"ok": {Work: func(ctx context.Context, ex *Execution) error {
			err := ex.SetProgress(ctx, 1, 2)
			if err == nil {
				err = ex.SetOutput(ctx, `{"done":true}`)
			}
			handled <- seen{row: *ex.Row(), progress: err}
			return nil
		}},
		"fails": {Backoff: constant(time.Hour), Work: func(context.Context, *Execution) error { return errors.New("boom") }},
	}
	cfg := config(k)
	cfg.Store, cfg.DB = st, db
	ch := events(&cfg)
	hooked := make(chan EventType, 10)
	cfg.Attempt = func(ctx context.Context, ex *Execution) (context.Context, func(Event)) {
		return ctx, func(e Event) { hooked <- e.Type }
	}
	ids := insert(t, st, db,
		store.NewJob{Kind: "ok", Queue: "q", Priority: 5, Attempts: 3, Payload: `{"n":1}`},
		store.NewJob{Kind: "fails", Queue: "q", Priority: 5, Attempts: 3, Payload: `{}`},
		store.NewJob{Kind: "gone", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`},
	)
	r := New(cfg)
	require.NoError(t, r.Start(context.Background()))

	got := collect(t, ch, map[int64]int{ids[0]: 2, ids[1]: 2, ids[2]: 2})
	stop(t, r)
	for _, id := range ids {
		require.Equal(t, EventStarted, got[id][0].Type)
	}
	require.Equal(t, EventCompleted, got[ids[0]][1].Type)
	s := <-handled
	require.NoError(t, s.progress)
	require.Equal(t, ids[0], s.row.ID)
	require.Equal(t, 1, s.row.Attempts)
	require.JSONEq(t, `{"n":1}`, string(s.row.Payload))

	e := got[ids[1]][1]
	require.Equal(t, EventRetrying, e.Type)
	require.Equal(t, time.Hour, e.RetryIn)
	require.EqualError(t, e.Err, "boom")

	e = got[ids[2]][1]
	require.Equal(t, EventFailed, e.Type)
	require.ErrorIs(t, e.Err, errUnknown)

	for id, want := range map[int64]string{ids[0]: statusCompleted, ids[1]: statusQueued, ids[2]: statusFailed} {
		requireStatus(t, st, id, want)
	}
	close(hooked)
	var ended []EventType
	for e := range hooked {
		ended = append(ended, e)
	}
	require.ElementsMatch(t, []EventType{EventCompleted, EventRetrying, EventFailed}, ended)
	stats := r.Stats()
	require.Equal(t, Stats{Claimed: 3, Completed: 1, Retried: 1, Failed: 1, Polls: stats.Polls}, stats)
}

// A job cancelled while it runs gets the cancellation as its context's
// cause, and its attempt's writes report the lease lost.
func TestCancelReachesTheHandler(t *testing.T) {
	t.Parallel()
	st, db := newStore(t)
	started := make(chan struct{})
	causes, writes := make(chan error, 1), make(chan error, 1)
	cfg := config(kinds{"wait": {Work: func(ctx context.Context, ex *Execution) error {
		close(started)
		<-ctx.Done()
		causes <- context.Cause(ctx)
		err := ex.SetProgress(context.WithoutCancel(ctx), 1, 1)
		writes <- err
		return err
	}}})
	r, ch, id := startOne(t, cfg, st, db, "wait", started)
	require.NoError(t, st.Tx(context.Background(), db, func(tx *gorm.DB) error {
		_, err := st.CancelJobs(tx, store.Filter{IDs: []int64{id}}, 1)
		return err
	}))
	require.ErrorIs(t, <-causes, errCancelled)
	require.ErrorIs(t, <-writes, errLeaseLost)
	got := collect(t, ch, map[int64]int{id: 2})
	stop(t, r)
	require.Equal(t, []EventType{EventStarted, EventCancelled}, []EventType{got[id][0].Type, got[id][1].Type})
	require.Equal(t, int64(1), r.Stats().Cancelled)
}

// Start refuses to start when the preflight fails, and may be called
// again; after Stop it refuses. Stop without Start closes Done.
func TestStartAndStop(t *testing.T) {
	t.Parallel()
	cfg := config(kinds{})
	down := errors.New("database down")
	cfg.Preflight = func(context.Context) (int, error) { return 0, down }
	r := New(cfg)
	require.ErrorIs(t, r.Start(context.Background()), down)
	require.NoError(t, r.Stop(context.Background()))
	<-r.Done()
	require.ErrorIs(t, r.Start(context.Background()), errStarted)
	require.NoError(t, r.Stop(context.Background()), "idempotent")
}

// A parent's completion releases its child in the same transaction; the
// child runs, and releases nothing.
func TestReleasesChildren(t *testing.T) {
	t.Parallel()
	st, db := newStore(t)
	work := func(context.Context, *Execution) error { return nil }
	cfg := config(kinds{"parent": {Work: work}, "child": {Work: work}})
	rules := oneRule{asked: make(chan Release, 2)}
	cfg.Store, cfg.DB, cfg.Rules = st, db, rules
	ch := events(&cfg)
	parent := insert(t, st, db, store.NewJob{Kind: "parent", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`})[0]
	r := New(cfg)
	require.NoError(t, r.Start(context.Background()))
	// The released event names the child, which the runner then runs.
	var released Event
	var all []Event
	timeout := time.After(30 * time.Second)
	for len(all) < 5 {
		select {
		case e := <-ch:
			all = append(all, e)
			if e.Type == EventReleased {
				released = e
			}
		case <-timeout:
			t.Fatalf("events so far: %v", all)
		}
	}
	stop(t, r)
	child := released.JobID
	var ofParent, ofChild []EventType
	for _, e := range all {
		switch {
		case e.JobID == parent || e.Type == EventReleased:
			ofParent = append(ofParent, e.Type)
		case e.JobID == child:
			ofChild = append(ofChild, e.Type)
		}
	}
	require.Equal(t, []EventType{EventStarted, EventReleased, EventCompleted}, ofParent,
		"the child is released before the parent's completion is reported")
	require.Equal(t, []EventType{EventStarted, EventCompleted}, ofChild)
	require.Equal(t, []int64{parent}, released.ParentIDs)
	require.Equal(t, "each", released.Rule)
	require.Equal(t, "child", released.Kind)
	rel := <-rules.asked
	require.Equal(t, Release{Rule: "each", Group: fmt.Sprint("job:", parent), Key: fmt.Sprint("sheaf-dep:each:job:", parent),
		Parents: []int64{parent}}, rel)
	require.Empty(t, rules.asked, "asked once")
	requireStatus(t, st, child, statusCompleted)
}

// A Stop out of time cancels the running job with Errors.Stopping and puts
// it back in the queue, its attempt uncounted, once its handler returns.
func TestStopOutOfTimeRequeues(t *testing.T) {
	t.Parallel()
	st, db := newStore(t)
	started, causes := make(chan struct{}), make(chan error, 1)
	cfg := config(kinds{"wait": {Work: func(ctx context.Context, _ *Execution) error {
		close(started)
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	}}})
	r, ch, id := startOne(t, cfg, st, db, "wait", started)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, r.Stop(ctx), context.Canceled)
	<-r.Done()
	require.ErrorIs(t, <-causes, errStopping)
	got := collect(t, ch, map[int64]int{id: 2})
	require.Equal(t, EventRequeued, got[id][1].Type)
	requireStatus(t, st, id, statusQueued)
	var attempts int
	require.NoError(t, db.Raw("SELECT attempts FROM "+store.JobsTable+" WHERE id = ?", id).Scan(&attempts).Error)
	require.Zero(t, attempts, "the attempt does not count")
	require.Equal(t, int64(1), r.Stats().Requeued)
}

// A first read that looks far is checked with more reads at once: a near
// server's next read settles it; a far server is believed after
// sureRoundTrips reads, and later reads are not checked again; a failed
// read ends the checking.
func TestRoundTripFarIsConfirmed(t *testing.T) {
	script := func(reads ...time.Duration) (func() (time.Duration, error), *int) {
		calls := 0
		return func() (time.Duration, error) {
			calls++
			if calls > len(reads) {
				return 0, errors.New("no more reads")
			}
			return reads[calls-1], nil
		}, &calls
	}
	var near roundTrips
	again, calls := script(300 * time.Microsecond)
	require.Equal(t, 300*time.Microsecond, near.confirmed(30*time.Millisecond, again))
	require.Equal(t, 1, *calls)

	var far roundTrips
	again, calls = script(60*time.Millisecond, 50*time.Millisecond, time.Millisecond)
	require.Equal(t, 50*time.Millisecond, far.confirmed(70*time.Millisecond, again), "three far reads")
	require.Equal(t, 2, *calls)
	require.Equal(t, 50*time.Millisecond, far.confirmed(80*time.Millisecond, again))
	require.Equal(t, 2, *calls, "believed: not checked again")

	var failing roundTrips
	again, calls = script()
	require.Equal(t, 30*time.Millisecond, failing.confirmed(30*time.Millisecond, again))
	require.Equal(t, 1, *calls)
}

// One slow read (a connection dialled anew after a restart) does not make
// a near server look far; a far server looks far from its first read, and
// a server that moves away is seen as far once every kept read says so.
func TestRoundTripIgnoresAOneOffDelay(t *testing.T) {
	var near roundTrips
	near.add(300 * time.Microsecond)
	require.Equal(t, 300*time.Microsecond, near.add(2*time.Second), "a restart's slow read is not the round trip")
	require.Equal(t, 300*time.Microsecond, near.add(400*time.Microsecond))

	var far roundTrips
	require.Equal(t, 50*time.Millisecond, far.add(50*time.Millisecond))

	var moved roundTrips
	moved.add(time.Millisecond)
	for range len(moved.last) - 1 {
		require.Equal(t, time.Millisecond, moved.add(60*time.Millisecond))
	}
	require.Equal(t, 60*time.Millisecond, moved.add(60*time.Millisecond), "once all kept reads are slow, the server is far")
}

// Results go out one statement at a time from a nearby server, farFlushes
// at a time behind a far one, each on a connection of its own: the first
// held for the runner's life, the others given back to the pool after
// each statement; all closed at the end.
func TestResultsFromAFarServerGoOutSeveralAtOnce(t *testing.T) {
	r := New(Config{Workers: 4})
	r.rttNanos.Store(int64(time.Millisecond))
	require.Equal(t, 1, r.flushes())
	r.rttNanos.Store(int64(50 * time.Millisecond))
	require.Equal(t, farFlushes, r.flushes())

	var opened []*closedConn
	conns := &resultConns{hold: func() store.Conn {
		c := &closedConn{}
		opened = append(opened, c)
		return c
	}}
	a := conns.get()
	conns.put(a)
	require.Same(t, a, conns.get(), "one at a time: the same connection")
	b := conns.get()
	require.NotSame(t, a, b, "two at once: two connections")
	conns.put(b)
	require.False(t, a.(*closedConn).closed, "the first is held")
	require.True(t, b.(*closedConn).closed, "the second went back to the pool")
	b.(*closedConn).closed = false
	require.Same(t, b, conns.get(), "and is used again for the next second")
	conns.put(a)
	require.Same(t, a, conns.get(), "the first, once free, first")
	require.Len(t, opened, 2)
	conns.Close()
	for _, c := range opened {
		require.True(t, c.closed)
	}
}

// closedConn is a store.Conn that records its Close.
type closedConn struct {
	store.Conn
	closed bool
}

func (c *closedConn) Close() { c.closed = true }
