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
	_, js := connect(t, serverURL())
	ctx := context.Background()
	name := fmt.Sprintf("sheaf_test_req_%d", streams.Add(1))
	for _, s := range []string{name, name + "_dead"} {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: s, Subjects: []string{s + ".>"}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = js.DeleteStream(context.Background(), s) })
	}
	for i := range 20 {
		v := `{"kind": "report", "payload": {}}`
		if i == 4 {
			v = `{"kind": "report", "payload": `
		}
		_, err := js.PublishMsg(ctx, &natsgo.Msg{Subject: name + ".in", Data: []byte(v)})
		require.NoError(t, err)
	}
	c := bridgetest.NewQueue(t)
	consumer := func() *nats.Consumer {
		sub, err := bridge.NewSubmitter(c, 0, 0)
		require.NoError(t, err)
		k, err := nats.NewConsumer(nats.ConsumerConfig{JetStream: js, Stream: name, Durable: "jobs", DeadLetterSubject: name + "_dead.x",
			Submitter: sub, MaxBatch: 7, AckWait: 300 * time.Millisecond, Log: bridgetest.Quiet()})
		require.NoError(t, err)
		return k
	}
	count := func() int64 {
		n, err := c.Count(ctx, queue.Filter{})
		require.NoError(t, err)
		return n
	}

	killedCtx, kill := context.WithCancel(ctx)
	dying := consumer()
	killed := make(chan struct{})
	nats.AfterSubmit(dying, func() { kill(); close(killed) })
	require.NoError(t, dying.Start(killedCtx))
	<-killed
	require.NoError(t, dying.Stop(ctx))
	require.Positive(t, count())

	k := consumer()
	require.NoError(t, k.Start(ctx))
	t.Cleanup(func() { require.NoError(t, k.Stop(context.Background())) })
	require.Eventually(t, func() bool { return count() == 19 }, 10*time.Second, 5*time.Millisecond)
	jobs, err := c.List(ctx, queue.Filter{})
	require.NoError(t, err)
	keys := map[string]bool{}
	for _, j := range jobs {
		require.False(t, keys[*j.IdempotencyKey], "one job per message")
		keys[*j.IdempotencyKey] = true
	}

	dead, err := js.Stream(ctx, name+"_dead")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := dead.Info(ctx)
		return err == nil && info.State.Msgs >= 1
	}, 10*time.Second, 10*time.Millisecond)
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
	_, js := connect(t, serverURL())
	ctx := context.Background()
	name := fmt.Sprintf("sheaf_test_req_%d", streams.Add(1))
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	for range 20 {
		_, err := js.PublishMsg(ctx, &natsgo.Msg{Subject: name + ".in", Data: []byte(`{"kind": "report", "payload": {}}`)})
		require.NoError(t, err)
	}
	c := bridgetest.NewQueue(t)
	consumer := func() *nats.Consumer {
		sub, err := bridge.NewSubmitter(c, 0, 0)
		require.NoError(t, err)
		k, err := nats.NewConsumer(nats.ConsumerConfig{JetStream: js, Stream: name, Durable: "jobs", DeadLetterSubject: name + ".dead",
			Submitter: sub, MaxBatch: 5, AckWait: time.Minute, Log: bridgetest.Quiet()})
		require.NoError(t, err)
		return k
	}
	killedCtx, kill := context.WithCancel(ctx)
	dying := consumer()
	killed := make(chan struct{})
	nats.AfterSubmit(dying, func() { kill(); close(killed) })
	require.NoError(t, dying.Start(killedCtx))
	<-killed
	require.NoError(t, dying.Stop(ctx))

	// The first batch is jobs, not acknowledged; the rest come now.
	k := consumer()
	require.NoError(t, k.Start(ctx))
	t.Cleanup(func() { require.NoError(t, k.Stop(context.Background())) })
	require.Eventually(t, func() bool {
		n, err := c.Count(ctx, queue.Filter{})
		require.NoError(t, err)
		return n == 20
	}, 20*time.Second, 5*time.Millisecond, "every request a job well within the ack wait")
}
