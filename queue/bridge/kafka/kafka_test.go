package kafka_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/bridge"
	"github.com/sheaf-dev/sheaf/queue/bridge/internal/bridgetest"
	"github.com/sheaf-dev/sheaf/queue/bridge/kafka"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

// topics are those of the three services the example shows.
var topics = []string{"job-created", "job-completed", "job-failed", "job-dead-letter", "job-cancelled"}

func topicOptions() []bridge.Option {
	return []bridge.Option{bridge.WithTopic(bridge.Created, topics[0]), bridge.WithTopic(bridge.Completed, topics[1]),
		bridge.WithTopic(bridge.Retrying, topics[2]), bridge.WithTopic(bridge.Failed, topics[3]), bridge.WithTopic(bridge.Cancelled, topics[4])}
}

// cluster starts a kfake cluster with the topics, on port (0: any).
func cluster(t *testing.T, port int) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.SeedTopics(3, topics...))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func client(t *testing.T, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// consumed reads every record of the topics from the start until n have
// arrived.
func consumed(t *testing.T, addrs []string, n int) []*kgo.Record {
	t.Helper()
	cl := client(t, addrs, kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		f := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "%d of %d records", len(out), n)
		out = append(out, f.Records()...)
	}
	return out
}

// types lists each job's event types, dropping copies of an event ID
// already seen.
func types(t *testing.T, recs []*kgo.Record) map[string][]string {
	t.Helper()
	// A job's records share a partition, but its events span topics:
	// order them by the event's ID, which is its order in the outbox.
	seen := map[string]bool{}
	out := map[string][]string{}
	byID := map[int64]bridge.CloudEvent{}
	var ids []int64
	for _, r := range recs {
		var e bridge.CloudEvent
		require.NoError(t, json.Unmarshal(r.Value, &e))
		require.Equal(t, e.ID, kafka.Header(r, kafka.IDHeader))
		require.Equal(t, e.Subject, string(r.Key))
		if seen[e.ID] {
			continue
		}
		seen[e.ID] = true
		id, err := strconv.ParseInt(e.ID, 10, 64)
		require.NoError(t, err)
		byID[id] = e
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		e := byID[id]
		out[e.Subject] = append(out[e.Subject], e.Type[len(bridge.TypePrefix):])
	}
	return out
}

// A relay publishes to Kafka: each event on its topic, keyed by its job,
// with its ID in ce_id and the job's trace context in the headers.
// setupRelay starts a relay test, in parallel: a broker, a publisher to it,
// and a queue with its outbox on.
func setupRelay(t *testing.T) (*kfake.Cluster, *kafka.Publisher, *queue.Client) {
	t.Helper()
	t.Parallel()
	kc := cluster(t, 0)
	pub, err := kafka.NewPublisher(client(t, kc.ListenAddrs()), 0)
	require.NoError(t, err)
	return kc, pub, bridgetest.NewQueue(t)
}

func TestRelayToKafka(t *testing.T) {
	kc, pub, c := setupRelay(t)
	ctx := context.Background()
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	res, err := c.Enqueue(ctx, bridgetest.Report{}, queue.TraceContext(tp, ""))
	require.NoError(t, err)
	_, err = c.Cancel(ctx, res.Job.ID)
	require.NoError(t, err)
	bridgetest.Run(t, c, pub, append(topicOptions(), bridge.WithLogger(bridgetest.Quiet()))...)

	recs := consumed(t, kc.ListenAddrs(), 2)
	require.Equal(t, map[string][]string{strconv.FormatInt(res.Job.ID, 10): {"created", "cancelled"}}, types(t, recs))
	for _, r := range recs {
		require.Equal(t, tp, kafka.Header(r, "traceparent"))
		require.Equal(t, bridge.ContentType, kafka.Header(r, "content-type"))
		require.Equal(t, recs[0].Partition, r.Partition, "a job's events share a partition")
	}
	require.ElementsMatch(t, []string{"job-created", "job-cancelled"}, []string{recs[0].Topic, recs[1].Topic})
}

// In binary mode the attributes are Kafka headers under "ce_", ce_id once,
// and the value is the event's data.
func TestRelayToKafkaInBinaryMode(t *testing.T) {
	kc, pub, c := setupRelay(t)
	ctx := context.Background()
	res, err := c.Enqueue(ctx, bridgetest.Report{})
	require.NoError(t, err)
	bridgetest.Run(t, c, pub, append(topicOptions(), bridge.WithBinaryMode(), bridge.WithLogger(bridgetest.Quiet()))...)

	r := consumed(t, kc.ListenAddrs(), 1)[0]
	ids := 0
	for _, h := range r.Headers {
		if h.Key == kafka.IDHeader {
			ids++
		}
	}
	require.Equal(t, 1, ids, "ce_id once")
	require.Equal(t, bridge.Created.Type(), kafka.Header(r, "ce_type"))
	require.Equal(t, strconv.FormatInt(res.Job.ID, 10), kafka.Header(r, "ce_subject"))
	require.Equal(t, "1.0", kafka.Header(r, "ce_specversion"))
	require.Equal(t, "application/json", kafka.Header(r, "content-type"))
	var d bridge.Data
	require.NoError(t, json.Unmarshal(r.Value, &d))
	require.Equal(t, res.Job.ID, d.JobID)
}

// While the broker is away, events wait in the outbox; a broker back on
// the same address gets them all, in order per job, none lost.
func TestKafkaAwayForAWhile(t *testing.T) {
	t.Parallel()
	kc := cluster(t, 0)
	addrs := kc.ListenAddrs()
	port, err := strconv.Atoi(addrs[0][len("127.0.0.1:"):])
	require.NoError(t, err)
	pub, err := kafka.NewPublisher(client(t, addrs, kgo.RetryTimeout(500*time.Millisecond), kgo.RecordDeliveryTimeout(time.Second)), time.Second)
	require.NoError(t, err)
	c := bridgetest.NewQueue(t)
	ctx := context.Background()
	relay, err := bridge.NewRelay(c, pub, append(topicOptions(), bridge.WithLogger(bridgetest.Quiet()), bridge.WithBatch(4))...)
	require.NoError(t, err)

	kc.Close()
	var jobs []string
	for range 6 {
		res, err := c.Enqueue(ctx, bridgetest.Report{}, queue.After(time.Hour))
		require.NoError(t, err)
		_, err = c.Cancel(ctx, res.Job.ID)
		require.NoError(t, err)
		jobs = append(jobs, strconv.FormatInt(res.Job.ID, 10))
	}
	_, err = relay.Run(ctx)
	require.Error(t, err, "the broker is away")

	back := cluster(t, port)
	require.Eventually(t, func() bool { _, err := relay.Run(ctx); return err == nil }, 20*time.Second, 50*time.Millisecond)
	got := types(t, consumed(t, back.ListenAddrs(), 12))
	for _, j := range jobs {
		require.Equal(t, []string{"created", "cancelled"}, got[j], "job %s", j)
	}
}

// A relay killed between the broker's acknowledgement and its delete
// publishes the events again: the broker holds two copies of each, with
// the same event ID, and a consumer that drops duplicates by ID sees each
// once.
func TestRelayKilledMidBatchResendsTheSameIDs(t *testing.T) {
	kc, pub, c := setupRelay(t)
	ctx := context.Background()
	var jobs []string
	for range 3 {
		res, err := c.Enqueue(ctx, bridgetest.Report{})
		require.NoError(t, err)
		jobs = append(jobs, strconv.FormatInt(res.Job.ID, 10))
	}
	bridgetest.RunKilled(t, c, pub, append(topicOptions(), bridge.WithLogger(bridgetest.Quiet()))...)
	recs := consumed(t, kc.ListenAddrs(), 6)
	ids := map[string]int{}
	for _, r := range recs {
		ids[kafka.Header(r, kafka.IDHeader)]++
	}
	require.Len(t, ids, 3)
	for id, n := range ids {
		require.Equal(t, 2, n, "event %s sent twice, with one ID", id)
	}
	got := types(t, recs)
	for _, j := range jobs {
		require.Equal(t, []string{"created"}, got[j])
	}
}

func TestNewPublisherRefusesANilClient(t *testing.T) {
	_, err := kafka.NewPublisher(nil, 0)
	require.ErrorIs(t, err, bridge.ErrInvalid)
}
