package nats_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/bridge"
	"github.com/sheaf-dev/sheaf/queue/bridge/internal/bridgetest"
	"github.com/sheaf-dev/sheaf/queue/bridge/nats"
)

// Requests become jobs, the poison one goes to the dead-letter subject
// with its reason and the rest flow; a consumer killed between an enqueue
// and its acks has the batch delivered again to the next, which makes no
// job twice; none is lost.
func TestConsumerEnqueuesOnceAndDeadLettersThePoison(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRequests(t, 20, 4, 7, 300*time.Millisecond)
	f.dieAfterFirstEnqueue()
	require.Positive(t, f.count())

	k := f.consumer()
	require.NoError(t, k.Start(ctx))
	t.Cleanup(func() { require.NoError(t, k.Stop(context.Background())) })
	require.Eventually(t, func() bool { return f.count() == 19 }, time.Minute, 5*time.Millisecond)
	jobs, err := f.c.List(ctx, queue.Filter{})
	require.NoError(t, err)
	keys := map[string]bool{}
	for _, j := range jobs {
		require.False(t, keys[*j.IdempotencyKey], "one job per message")
		keys[*j.IdempotencyKey] = true
	}

	dead, err := f.js.Stream(ctx, f.name+"_dead")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := dead.Info(ctx)
		return err == nil && info.State.Msgs >= 1
	}, time.Minute, 10*time.Millisecond)
	m, err := dead.GetMsg(ctx, 1)
	require.NoError(t, err)
	require.Contains(t, m.Header.Get(nats.ReasonHeader), "not a job request")
}

func TestNewConsumerRefusesAnIncompleteConfig(t *testing.T) {
	_, err := nats.NewConsumer(nats.ConsumerConfig{Stream: "s"})
	require.ErrorIs(t, err, bridge.ErrInvalid)
}

// A consumer fetches a batch while it enqueues the one before; stopped, it
// hands the batch it fetched ahead back to the server, which delivers it
// to the next consumer at once rather than after the ack wait.
func TestStoppedConsumerHandsBackTheBatchFetchedAhead(t *testing.T) {
	t.Parallel()
	f := newRequests(t, 20, -1, 5, time.Minute)
	f.dieAfterFirstEnqueue()

	// The first batch is jobs, not acknowledged; the rest come now.
	k := f.consumer()
	require.NoError(t, k.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, k.Stop(context.Background())) })
	require.Eventually(t, func() bool { return f.count() == 20 }, 20*time.Second, 5*time.Millisecond,
		"every request a job well within the ack wait")
}

// requests is a stream of job requests, its dead-letter stream, and a
// queue for their jobs.
type requests struct {
	t        *testing.T
	js       jetstream.JetStream
	name     string
	c        *queue.Client
	maxBatch int
	ackWait  time.Duration
}

// newRequests publishes n requests, the one at poison (if any) malformed,
// to a new stream, for consumers of maxBatch and ackWait.
func newRequests(t *testing.T, n, poison, maxBatch int, ackWait time.Duration) *requests {
	_, js := connect(t, serverURL())
	ctx := context.Background()
	name := fmt.Sprintf("sheaf_test_req_%d", streams.Add(1))
	for _, s := range []string{name, name + "_dead"} {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: s, Subjects: []string{s + ".>"}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = js.DeleteStream(context.Background(), s) })
	}
	for i := range n {
		v := `{"kind": "report", "payload": {}}`
		if i == poison {
			v = `{"kind": "report", "payload": `
		}
		_, err := js.PublishMsg(ctx, &natsgo.Msg{Subject: name + ".in", Data: []byte(v)})
		require.NoError(t, err)
	}
	return &requests{t: t, js: js, name: name, c: bridgetest.NewQueue(t), maxBatch: maxBatch, ackWait: ackWait}
}

// consumer returns a consumer of the stream, not started.
func (r *requests) consumer() *nats.Consumer {
	sub, err := bridge.NewSubmitter(r.c, 0, 0)
	require.NoError(r.t, err)
	k, err := nats.NewConsumer(nats.ConsumerConfig{JetStream: r.js, Stream: r.name, Durable: "jobs", DeadLetterSubject: r.name + "_dead.x",
		Submitter: sub, MaxBatch: r.maxBatch, AckWait: r.ackWait, Log: bridgetest.Quiet()})
	require.NoError(r.t, err)
	return k
}

// dieAfterFirstEnqueue runs a consumer that is killed between its first
// batch's enqueue and its acks.
func (r *requests) dieAfterFirstEnqueue() {
	ctx := context.Background()
	killedCtx, kill := context.WithCancel(ctx)
	dying := r.consumer()
	killed := make(chan struct{})
	nats.AfterSubmit(dying, func() { kill(); close(killed) })
	require.NoError(r.t, dying.Start(killedCtx))
	<-killed
	require.NoError(r.t, dying.Stop(ctx))
}

// count is how many jobs there are.
func (r *requests) count() int64 {
	n, err := r.c.Count(context.Background(), queue.Filter{})
	require.NoError(r.t, err)
	return n
}
