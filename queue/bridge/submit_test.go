package bridge_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/bridge"
	"github.com/sheaf-dev/sheaf/queue/bridge/internal/bridgetest"
	"github.com/sheaf-dev/sheaf/queue/internal/queuetest"
)

// A batch of submissions becomes jobs in one go, each keyed by its
// message, each with its created event in the outbox; the malformed are
// rejected with their reason and the rest stored; a message delivered
// again makes no second job, and no second event.
func TestSubmitStoresTheGoodAndRejectsTheRest(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	s, err := bridge.NewSubmitter(c, 0, 0)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, bridge.Enable(ctx, c))
	subs := []bridge.Submission{
		{Key: "t/0/0", Value: []byte(`{"kind": "report", "payload": {}, "priority": 7}`), Headers: map[string]string{"traceparent": traceparent}},
		{Key: "t/0/1", Value: []byte(`{"kind": "report", "payload": {}`)},
		{Key: "t/0/2", Value: []byte(`{"kind": "nope", "payload": {}}`)},
		{Key: "t/0/3", Value: []byte(`{"kind": "report", "payload": {"fail": 3}}`)},
		{Key: "t/0/4", Value: []byte(`{"kind": "report", "payload": {}, "priority": 99}`)},
		{Key: "t/0/5", Value: []byte(`{"kind": "report"}`)},
		{Key: "t/0/6", Value: []byte(`{"kind": "report", "payload": {"fail": "once"}, "queue": "other", "correlation_id": "c"}`)},
	}
	rejected, err := s.Submit(ctx, subs)
	require.NoError(t, err)
	var idx []int
	for _, r := range rejected {
		idx = append(idx, r.Index)
		require.NotEmpty(t, r.Reason)
	}
	require.Equal(t, []int{1, 2, 3, 4, 5}, idx)
	require.Contains(t, rejected[1].Reason, "nope")

	jobs, err := c.List(ctx, queue.Filter{})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	require.Equal(t, 7, jobs[0].Priority)
	require.Equal(t, "t/0/0", *jobs[0].IdempotencyKey)
	require.Equal(t, traceparent, jobs[0].Metadata["traceparent"])
	require.Equal(t, "other", jobs[1].Queue)

	rejected, err = s.Submit(ctx, subs[:1])
	require.NoError(t, err)
	require.Empty(t, rejected)
	n, err := c.Count(ctx, queue.Filter{})
	require.NoError(t, err)
	require.Equal(t, int64(2), n, "delivered again: no second job")
	pub := &broker{}
	bridgetest.Run(t, c, pub)
	require.Equal(t, map[int64][]string{jobs[0].ID: {"created"}, jobs[1].ID: {"created"}}, byJob(t, pub.messages()))
}

// Wait holds back while the submitter's maximum of its jobs are queued,
// and returns once the runners have worked them down.
func TestWaitHoldsBackWhileTooManyAreQueued(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	s, err := bridge.NewSubmitter(c, 2, time.Millisecond)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Wait(ctx), "nothing submitted yet")
	_, err = s.Submit(ctx, []bridge.Submission{{Key: "a", Value: []byte(`{"kind": "report", "payload": {}}`)}})
	require.NoError(t, err)
	require.NoError(t, s.Wait(ctx), "one queued, two allowed")
	_, err = s.Submit(ctx, []bridge.Submission{{Key: "b", Value: []byte(`{"kind": "report", "payload": {}}`)}})
	require.NoError(t, err)

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, s.Wait(short), context.DeadlineExceeded, "two queued: it holds back")

	queuetest.StartRunner(t, c, queue.WithLogger(quiet()), queue.WithPollInterval(10*time.Millisecond))
	require.NoError(t, s.Wait(ctx), "the runner works them down")
}

// Wait counts the queued jobs at most once per poll interval: in between it
// adds what the submitter submitted to its last count, so jobs enqueued
// behind its back go unseen until the next count, and its own submissions
// hold it back at once.
func TestWaitCountsOncePerPollInterval(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	s, err := bridge.NewSubmitter(c, 3, time.Hour)
	require.NoError(t, err)
	ctx := context.Background()
	req := func(key string) bridge.Submission {
		return bridge.Submission{Key: key, Value: []byte(`{"kind": "report", "payload": {}}`)}
	}
	_, err = s.Submit(ctx, []bridge.Submission{req("a")})
	require.NoError(t, err)
	require.NoError(t, s.Wait(ctx), "counted: one queued")
	for range 5 {
		_, err := c.Enqueue(ctx, report{})
		require.NoError(t, err)
	}
	require.NoError(t, s.Wait(ctx), "six queued, but not counted again within the interval")

	_, err = s.Submit(ctx, []bridge.Submission{req("b"), req("c")})
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, s.Wait(short), context.DeadlineExceeded, "its own submissions reach the maximum: it counts, and holds back")
}
