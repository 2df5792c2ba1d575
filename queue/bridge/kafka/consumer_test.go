package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/bridge"
	"github.com/sheaf-dev/sheaf/queue/bridge/internal/bridgetest"
	"github.com/sheaf-dev/sheaf/queue/bridge/kafka"
)

const (
	requests = "job-requests"
	dlq      = "job-requests-dead"
)

func requestCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, requests, dlq))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// produce sends n requests, the one at poison (if any) malformed.
func produce(t *testing.T, addrs []string, from, n, poison int) {
	t.Helper()
	cl := client(t, addrs)
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		v := `{"kind": "report", "payload": {}}`
		if i == poison {
			v = `{"kind": "report", "payload": `
		}
		recs = append(recs, &kgo.Record{Topic: requests, Key: []byte(fmt.Sprint(i)), Value: []byte(v)})
	}
	require.NoError(t, cl.ProduceSync(context.Background(), recs...).FirstErr())
}

func consumer(t *testing.T, addrs []string, c *queue.Client, maxQueued int64) (*kafka.Consumer, *bridge.Submitter) {
	t.Helper()
	sub, err := bridge.NewSubmitter(c, maxQueued, 5*time.Millisecond)
	require.NoError(t, err)
	k, err := kafka.NewConsumer(kafka.ConsumerConfig{Brokers: addrs, Group: "g", Topics: []string{requests}, DeadLetterTopic: dlq,
		Submitter: sub, MaxBatch: 7, Log: bridgetest.Quiet(), Options: []kgo.Opt{kgo.FetchMaxWait(50 * time.Millisecond),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}})
	require.NoError(t, err)
	return k, sub
}

func count(t *testing.T, c *queue.Client) int64 {
	t.Helper()
	n, err := c.Count(context.Background(), queue.Filter{})
	require.NoError(t, err)
	return n
}

// Requests become jobs, the poison one goes to the dead-letter topic with
// its reason and the rest flow; a consumer killed between an enqueue and
// its commit has the batch delivered again to the next, which makes no
// job twice; none is lost.
func TestConsumerEnqueuesOnceAndDeadLettersThePoison(t *testing.T) {
	t.Parallel()
	kc := requestCluster(t)
	c := bridgetest.NewQueue(t)
	produce(t, kc.ListenAddrs(), 0, 30, 4)

	ctx, kill := context.WithCancel(context.Background())
	dying, _ := consumer(t, kc.ListenAddrs(), c, 0)
	killed := make(chan struct{})
	kafka.AfterSubmit(dying, func() { kill(); close(killed) })
	require.NoError(t, dying.Start(ctx))
	<-killed
	require.NoError(t, dying.Stop(context.Background()))
	firstBatch := count(t, c)
	require.Positive(t, firstBatch)

	k, _ := consumer(t, kc.ListenAddrs(), c, 0)
	require.NoError(t, k.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, k.Stop(context.Background())) })
	require.Eventually(t, func() bool { return count(t, c) == 29 }, time.Minute, 5*time.Millisecond)

	jobs, err := c.List(context.Background(), queue.Filter{})
	require.NoError(t, err)
	keys := map[string]bool{}
	for _, j := range jobs {
		require.False(t, keys[*j.IdempotencyKey], "one job per message")
		keys[*j.IdempotencyKey] = true
	}

	dead := client(t, kc.ListenAddrs(), kgo.ConsumeTopics(dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(50*time.Millisecond))
	pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) == 0 && pctx.Err() == nil {
		recs = append(recs, dead.PollFetches(pctx).Records()...)
	}
	require.GreaterOrEqual(t, len(recs), 1)
	require.Equal(t, "4", string(recs[0].Key))
	require.Contains(t, kafka.Header(recs[0], kafka.ReasonHeader), "not a job request")
}

// The consumer stops fetching while its queued jobs reach the maximum,
// and goes on once the runners have worked them.
func TestConsumerHoldsBackWhileTooManyAreQueued(t *testing.T) {
	t.Parallel()
	kc := requestCluster(t)
	c := bridgetest.NewQueue(t)
	produce(t, kc.ListenAddrs(), 0, 40, -1)
	k, _ := consumer(t, kc.ListenAddrs(), c, 10)
	require.NoError(t, k.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, k.Stop(context.Background())) })
	require.Eventually(t, func() bool { return count(t, c) >= 10 }, time.Minute, 5*time.Millisecond)
	require.Never(t, func() bool { return count(t, c) > 10+7 }, 300*time.Millisecond, 10*time.Millisecond,
		"at most one batch past the maximum")

	r, err := queue.NewRunner(c, queue.WithLogger(bridgetest.Quiet()), queue.WithPollInterval(10*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, r.Stop(context.Background())) })
	require.Eventually(t, func() bool { return count(t, c) == 40 }, time.Minute, 5*time.Millisecond)
}

func TestNewConsumerRefusesAnIncompleteConfig(t *testing.T) {
	_, err := kafka.NewConsumer(kafka.ConsumerConfig{Brokers: []string{"x"}})
	require.ErrorIs(t, err, bridge.ErrInvalid)
}
