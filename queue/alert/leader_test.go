package alert_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/alert"
)

// Two runners given an Alerter each send each notice once: only the
// maintenance leader runs its Alerter. When the leader stops, the other
// carries on, and sends what happens next, once.
func TestTwoRunnersSendEachNoticeOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// A lease that a loaded machine renews in time: a renewal later than a
	// third of it stops the leader's rounds, and a notice its round had
	// taken waits out the retry backoff. Stop resigns, so the other runner
	// takes over within a third of it.
	start := func(id string) *queue.Runner {
		a, err := alert.New(e.client, alert.WithLogger(quiet()), alert.WithSink("test", e.sink), alert.WithRules(alert.Dead()),
			alert.WithInterval(10*time.Millisecond))
		require.NoError(t, err)
		r, err := queue.NewRunner(e.client, queue.WithRunnerID(id), queue.WithLease(5*time.Second), queue.WithQueues("elsewhere"),
			queue.WithMaintenance(a), queue.WithLogger(quiet()))
		require.NoError(t, err)
		require.NoError(t, r.Start(context.Background()))
		t.Cleanup(func() { require.NoError(t, r.Stop(context.Background())) })
		return r
	}
	first := start("first")
	start("second")
	for i := range 3 {
		e.fail(t, e.enqueue(t), "boom "+string(rune('a'+i)))
	}
	waitNotices(t, e.sink, 3)

	require.NoError(t, first.Stop(context.Background()))
	e.fail(t, e.enqueue(t), "boom d")
	waitNotices(t, e.sink, 4)

	// A round of its own finds nothing left to send.
	a, err := alert.New(e.client, alert.WithLogger(quiet()), alert.WithSink("test", e.sink), alert.WithRules(alert.Dead()))
	require.NoError(t, err)
	run(t, a)
	ids := map[string]bool{}
	for _, n := range e.sink.notices() {
		require.False(t, ids[n.EventID], "sent twice: %s", n.EventID)
		ids[n.EventID] = true
	}
	require.Len(t, ids, 4)
}

// waitNotices waits until sink has n notices, and fails the test if it
// gets more or takes 30 seconds.
func waitNotices(t *testing.T, sink *recorder, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return len(sink.notices()) >= n }, 30*time.Second, 5*time.Millisecond)
	require.Len(t, sink.notices(), n)
}
