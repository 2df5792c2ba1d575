package queue_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
)

// childRoundsEnv, if set, gives the child runner a roundsTask whose rounds
// last this many milliseconds.
const childRoundsEnv = "SHEAF_QUEUE_CHILD_ROUNDS"

// childMaintenance is the child runner's maintenance option: a roundsTask
// if the parent asked for one.
func childMaintenance(db *gorm.DB, id string) queue.RunnerOption {
	ms, err := strconv.Atoi(os.Getenv(childRoundsEnv))
	if err != nil {
		return queue.WithMaintenance()
	}
	return queue.WithMaintenance(roundsTask{db: db, holder: id, length: time.Duration(ms) * time.Millisecond})
}

// roundsTask is a maintenance task whose rounds take time, recorded in the
// rounds table: each attempt at a round, by whom, and when it began and
// ended, in Unix nanoseconds of this machine's clock, which the processes
// of a test share. A round cut short (or whose leader died) is done again
// by the next round, on whichever runner leads then. It announces each
// round on stdout as it begins.
type roundsTask struct {
	db     *gorm.DB
	holder string
	length time.Duration
}

const createRounds = `CREATE TABLE rounds (round int NOT NULL, holder text NOT NULL, began bigint NOT NULL, ended bigint,
	finished int NOT NULL DEFAULT 0)`

// nextRound is the first round without a finished attempt, or the one
// after the last.
const nextRound = `SELECT coalesce(
	(SELECT min(round) FROM rounds r WHERE NOT EXISTS (SELECT 1 FROM rounds f WHERE f.round = r.round AND f.finished = 1)),
	(SELECT coalesce(max(round), 0) + 1 FROM rounds))`

func (roundsTask) Name() string { return "rounds" }

func (t roundsTask) Run(ctx context.Context) (time.Duration, error) {
	const pause = 20 * time.Millisecond
	var round int
	if err := t.db.WithContext(ctx).Raw(nextRound).Scan(&round).Error; err != nil {
		return pause, err
	}
	if ctx.Err() != nil {
		return pause, ctx.Err()
	}
	// Written whatever becomes of ctx now: the round has begun.
	db := t.db.WithContext(context.WithoutCancel(ctx))
	began := time.Now().UnixNano()
	if err := db.Exec("INSERT INTO rounds (round, holder, began) VALUES (?, ?, ?)", round, t.holder, began).Error; err != nil {
		return pause, err
	}
	fmt.Printf("round %d %s\n", round, t.holder)
	finished := 0
	select {
	case <-time.After(t.length):
		finished = 1
	case <-ctx.Done():
	}
	ended := time.Now().UnixNano()
	return pause, db.Exec("UPDATE rounds SET ended = ?, finished = ? WHERE round = ? AND holder = ? AND began = ?",
		ended, finished, round, t.holder, began).Error
}

type roundRow struct {
	Round    int
	Holder   string
	Began    int64
	Ended    *int64
	Finished int
}

// Two runner processes with a maintenance task whose rounds take 300 ms:
// the first leads; killed with SIGKILL in the middle of a round, it is
// replaced by the other within about a lease, which does that round again
// and carries on. The rounds' ledger shows no round skipped and no two
// attempts at once: each began after the one before had ended, or, for the
// round the dead process held, after it was killed.
func TestLeaderKilledMidRoundIsReplaced(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	require.NoError(t, e.db.Gorm.Exec(createRounds).Error)
	// Two seconds, not one: each campaign's statement is bounded by a
	// third of the lease, and on a loaded machine a third of a second is
	// not always enough for a statement, or for the new connection that
	// follows a statement cut short.
	const lease = 2 * time.Second
	rounds := childRoundsEnv + "=300"
	a := startChild(t, e.db.DSN, "lead-a", lease, nil, rounds)
	// Read from the ledger, not the child's output: the round may begin
	// before the child says it is ready, and startChild skips what comes
	// before that.
	require.Eventually(t, func() bool {
		var n int64
		return e.db.Gorm.Raw("SELECT count(*) FROM rounds WHERE round = 1 AND holder = 'lead-a'").Scan(&n).Error == nil && n > 0
	}, 60*time.Second, 5*time.Millisecond, "lead-a begins round 1")
	b := startChild(t, e.db.DSN, "lead-b", lease, nil, rounds)

	runners, err := e.client.Runners(context.Background(), 0)
	require.NoError(t, err)
	require.Len(t, runners, 2)
	require.True(t, runners[0].Leader, "lead-a leads")
	require.False(t, runners[1].Leader)

	var killed int
	_, err = fmt.Sscanf(a.expect(t, "round "), "round %d", &killed)
	require.NoError(t, err)
	a.kill(t)
	dead := time.Now()
	// A loaded machine may let rounds end before the kill lands: lead-b
	// carries on with the first that lead-a did not finish.
	var next int
	require.NoError(t, e.db.Gorm.Raw("SELECT coalesce(max(round), 0) + 1 FROM rounds WHERE holder = 'lead-a' AND finished = 1").Scan(&next).Error)
	require.GreaterOrEqual(t, next, killed)
	b.expect(t, fmt.Sprintf("round %d lead-b", next))
	took := time.Since(dead)
	t.Logf("lead-b took over %v after lead-a was killed (lease %v)", took, lease)
	// A lease, and seconds of room for a loaded machine (the children
	// share two cores with the rest of the suite: one run took 10 s to
	// take over from a lease of 1 s); a takeover that waited for the
	// default lease (30 s) would not pass. The children's warnings, on
	// stderr, say why a takeover was slow.
	require.Less(t, took, 15*time.Second, "within about a lease, and room for a loaded machine")
	b.expect(t, fmt.Sprintf("round %d lead-b", next+2))
	b.stop(t)

	var ledger []roundRow
	require.NoError(t, e.db.Gorm.Raw("SELECT round, holder, began, ended, finished FROM rounds ORDER BY began").Scan(&ledger).Error)
	require.GreaterOrEqual(t, len(ledger), killed+2)
	last := 0
	for i, r := range ledger {
		require.LessOrEqual(t, r.Round, last+1, "no round skipped: %+v", ledger)
		last = max(last, r.Round)
		if i == 0 {
			continue
		}
		prev := ledger[i-1]
		end := dead.UnixNano() // the dead process's attempt ended with it
		if prev.Ended != nil {
			end = *prev.Ended
		} else {
			require.Equal(t, "lead-a", prev.Holder, "only the dead process left an attempt unended: %+v", ledger)
			require.Equal(t, next, prev.Round, "the round the kill cut is the one lead-b began with")
		}
		require.GreaterOrEqual(t, r.Began, end, "attempt %d began before the one before ended: %+v", i, ledger)
		if prev.Finished == 1 {
			require.Equal(t, prev.Round+1, r.Round, "a finished round is not done again: %+v", ledger)
		} else {
			require.Equal(t, prev.Round, r.Round, "an unfinished round is done again next: %+v", ledger)
		}
	}
}

// spans records when each runner's copy of a maintenance task held a round
// open, from its start until its context ended.
type spans struct {
	mu      sync.Mutex
	start   map[string]time.Time
	end     map[string]time.Time
	started chan string
}

func newSpans() *spans {
	return &spans{start: map[string]time.Time{}, end: map[string]time.Time{}, started: make(chan string, 10)}
}

func (s *spans) task(runner string) queue.MaintenanceTask { return spanTask{s, runner} }

type spanTask struct {
	s      *spans
	runner string
}

func (spanTask) Name() string { return "span" }

func (t spanTask) Run(ctx context.Context) (time.Duration, error) {
	t.s.mu.Lock()
	t.s.start[t.runner] = time.Now()
	t.s.mu.Unlock()
	t.s.started <- t.runner
	<-ctx.Done()
	t.s.mu.Lock()
	t.s.end[t.runner] = time.Now()
	t.s.mu.Unlock()
	return time.Second, nil
}

// A leader cut off from the server (its connections pass through a proxy
// that stops delivering) stops its task before its leadership can lapse,
// and so before the runner that takes over starts its own.
func TestCutOffLeaderStopsItsTasksBeforeAnotherLeads(t *testing.T) {
	pgtest.PostgresOnly(t, "a TCP proxy cuts the connection to the server")
	t.Parallel()
	e := newEnv(t, nil)
	// Long enough that a loaded machine's delays stay well inside the
	// third of it between the last renewal and the task's deadline.
	const lease = 4500 * time.Millisecond
	s := newSpans()
	co := startCutOff(t, e, queue.WithLease(lease), queue.WithMaintenance(s.task("cut-off")))
	require.Equal(t, "cut-off", <-s.started)
	e.runner(t, queue.WithRunnerID("other"), queue.WithLease(lease), queue.WithMaintenance(s.task("other")))
	co.proxy.Partition()
	cut := time.Now()
	require.Equal(t, "other", <-s.started)
	s.mu.Lock()
	defer s.mu.Unlock()
	stopped, ok := s.end["cut-off"]
	require.True(t, ok, "the cut-off leader's task stopped")
	require.True(t, stopped.Before(s.start["other"]), "before the other runner's began")
	require.Less(t, stopped.Sub(cut), lease, "within 2/3 of a lease of its last renewal")
	t.Logf("cut off at 0; its task stopped at %v; the other's began at %v", stopped.Sub(cut), s.start["other"].Sub(cut))
}
