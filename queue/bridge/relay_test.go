package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/bridge"
	"github.com/sheaf-dev/sheaf/queue/internal/queuetest"
)

const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func newRelay(t *testing.T, c *queue.Client, pub bridge.Publisher, opts ...bridge.Option) *bridge.Relay {
	t.Helper()
	r, err := bridge.NewRelay(c, pub, append([]bridge.Option{bridge.WithLogger(quiet())}, opts...)...)
	require.NoError(t, err)
	return r
}

// A runner that leads runs the relay: every job's events reach the broker
// in order, on their event's topic, with the job's trace context.
func TestRelayPublishesEachJobsEventsInOrder(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	require.NoError(t, bridge.Enable(context.Background(), c))
	b := &broker{}
	relay := newRelay(t, c, b, bridge.WithTopic(bridge.Failed, "job-dead-letter"), bridge.WithSource("test"))
	ctx := context.Background()
	ok, err := c.Enqueue(ctx, report{}, queue.TraceContext(traceparent, "k=v"))
	require.NoError(t, err)
	retried, err := c.Enqueue(ctx, report{Fail: "once"})
	require.NoError(t, err)
	dead, err := c.Enqueue(ctx, report{Fail: "never", Permanent: true})
	require.NoError(t, err)
	cancelled, err := c.Enqueue(ctx, report{}, queue.After(time.Hour))
	require.NoError(t, err)
	_, err = c.Cancel(ctx, cancelled.Job.ID)
	require.NoError(t, err)

	queuetest.StartRunner(t, c, queue.WithMaintenance(relay), queue.WithLogger(quiet()), queue.WithPollInterval(10*time.Millisecond))
	want := map[int64][]string{
		ok.Job.ID:        {"created", "completed"},
		retried.Job.ID:   {"created", "retrying", "completed"},
		dead.Job.ID:      {"created", "failed"},
		cancelled.Job.ID: {"created", "cancelled"},
	}
	require.Eventually(t, func() bool { return len(b.messages()) == 9 }, time.Minute, 5*time.Millisecond)
	msgs := b.messages()
	require.Equal(t, want, byJob(t, msgs))
	for i, e := range events(t, msgs) {
		require.Equal(t, "1.0", e.SpecVersion)
		require.Equal(t, "test", e.Source)
		require.Equal(t, bridge.ContentType, msgs[i].Headers["content-type"])
		require.Equal(t, e.Subject, msgs[i].Key)
		topic := bridge.DefaultTopic(bridge.Event(e.Type[len(bridge.TypePrefix):]))
		if e.Type == bridge.Failed.Type() {
			topic = "job-dead-letter"
			require.Contains(t, e.Data.Error, "never")
		}
		require.Equal(t, topic, msgs[i].Topic)
		if e.Data.JobID == ok.Job.ID {
			require.Equal(t, traceparent, e.TraceParent)
			require.Equal(t, traceparent, msgs[i].Headers["traceparent"])
			require.Equal(t, "k=v", msgs[i].Headers["tracestate"])
		} else {
			require.NotContains(t, msgs[i].Headers, "traceparent")
		}
	}
}

// While the broker is down, events wait in the outbox; once it is back they
// all arrive, in order per job, none lost.
func TestEventsWaitForTheBroker(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	ctx := context.Background()
	down := errors.New("broker down")
	b := &broker{fail: func(bridge.Message) error { return down }}
	relay := newRelay(t, c, b, bridge.WithBatch(7), bridge.WithRetryDelay(time.Millisecond))
	_, err := relay.Run(ctx) // turns the outbox on
	require.NoError(t, err)

	var ids []int64
	for range 10 {
		res, err := c.Enqueue(ctx, report{}, queue.After(time.Hour))
		require.NoError(t, err)
		ids = append(ids, res.Job.ID)
	}
	for _, id := range ids[:5] {
		_, err := c.Cancel(ctx, id)
		require.NoError(t, err)
	}
	next, err := relay.Run(ctx)
	require.ErrorIs(t, err, down)
	require.Equal(t, time.Millisecond, next, "the retry delay after a failure")
	require.Empty(t, b.messages())

	b.mu.Lock()
	b.fail = nil
	b.mu.Unlock()
	next, err = relay.Run(ctx)
	require.NoError(t, err)
	require.Equal(t, bridge.DefaultPollInterval/4, next, "it published: sooner than the poll interval")
	next, err = relay.Run(ctx)
	require.NoError(t, err)
	require.Equal(t, bridge.DefaultPollInterval, next, "an empty outbox: the poll interval")
	got := byJob(t, b.messages())
	require.Len(t, b.messages(), 15, "every event once")
	for i, id := range ids {
		want := []string{"created"}
		if i < 5 {
			want = append(want, "cancelled")
		}
		require.Equal(t, want, got[id])
	}
}

// An event the broker refused holds its job's later events back, and only
// its job's: the others flow, and it is sent again next round, before them.
func TestARefusedEventHoldsBackItsJobOnly(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	ctx := context.Background()
	require.NoError(t, bridge.Enable(ctx, c))
	stuck, err := c.Enqueue(ctx, report{}, queue.After(time.Hour))
	require.NoError(t, err)
	other, err := c.Enqueue(ctx, report{}, queue.After(time.Hour))
	require.NoError(t, err)
	for _, id := range []int64{stuck.Job.ID, other.Job.ID} {
		_, err := c.Cancel(ctx, id)
		require.NoError(t, err)
	}
	refused := errors.New("refused")
	b := &broker{fail: func(m bridge.Message) error {
		if m.Key == keyOf(stuck.Job.ID) {
			return refused
		}
		return nil
	}}
	relay := newRelay(t, c, b)
	_, err = relay.Run(ctx)
	require.ErrorIs(t, err, refused)
	require.Equal(t, map[int64][]string{other.Job.ID: {"created", "cancelled"}}, byJob(t, b.messages()))

	b.mu.Lock()
	b.fail = nil
	b.mu.Unlock()
	_, err = relay.Run(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"created", "cancelled"}, byJob(t, b.messages())[stuck.Job.ID])
	require.Len(t, b.messages(), 4)
}

// A relay that dies after its broker acknowledged a batch and before it
// deleted it sends the batch again: the copies carry the same IDs, and
// nothing is lost.
func TestARelayKilledBeforeItsDeleteSendsTheSameIDsAgain(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	ctx := context.Background()
	require.NoError(t, bridge.Enable(ctx, c))
	for range 3 {
		_, err := c.Enqueue(ctx, report{})
		require.NoError(t, err)
	}
	killed, kill := context.WithCancel(ctx)
	b := &broker{acked: kill}
	_, err := newRelay(t, c, b).Run(killed)
	require.ErrorIs(t, err, context.Canceled)
	first := b.messages()
	require.Len(t, first, 3)

	b.acked = nil
	_, err = newRelay(t, c, b).Run(ctx)
	require.NoError(t, err)
	all := b.messages()
	require.Len(t, all, 6)
	for i := range first {
		require.Equal(t, first[i].ID, all[3+i].ID)
		require.Equal(t, first[i].Value, all[3+i].Value, "the same event, byte for byte")
	}
	_, err = newRelay(t, c, b).Run(ctx)
	require.NoError(t, err)
	require.Len(t, b.messages(), 6, "deleted once acknowledged")
}

// Bad arguments are refused with ErrInvalid.
func TestNewRelayRefusesBadArguments(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for name, opts := range map[string][]bridge.Option{
		"nil option":    {nil},
		"unknown event": {bridge.WithTopic("begun", "x")},
		"empty topic":   {bridge.WithTopic(bridge.Created, "")},
		"empty source":  {bridge.WithSource("")},
		"batch":         {bridge.WithBatch(0)},
		"poll":          {bridge.WithPollInterval(0)},
		"retry":         {bridge.WithRetryDelay(-time.Second)},
		"logger":        {bridge.WithLogger(nil)},
	} {
		_, err := bridge.NewRelay(c, &broker{}, opts...)
		require.ErrorIs(t, err, bridge.ErrInvalid, name)
	}
	_, err := bridge.NewRelay(nil, &broker{})
	require.ErrorIs(t, err, bridge.ErrInvalid)
	require.ErrorIs(t, bridge.Enable(context.Background(), c, bridge.Completed), bridge.ErrInvalid, "only Started is optional")
	_, err = bridge.NewRelay(c, nil)
	require.ErrorIs(t, err, bridge.ErrInvalid)
}

func keyOf(id int64) string { return strconv.FormatInt(id, 10) }

// In binary mode each message's value is the event's data and its
// attributes are headers under the publisher's prefix; with WithStarted a
// claim is announced too, between the job's creation and its end.
func TestRelayInBinaryModeWithStarts(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	ctx := context.Background()
	require.NoError(t, bridge.Enable(ctx, c, bridge.Started))
	b := &broker{}
	relay := newRelay(t, c, b, bridge.WithBinaryMode(), bridge.WithStarted(), bridge.WithSource("test"))
	ok, err := c.Enqueue(ctx, report{}, queue.TraceContext(traceparent, ""))
	require.NoError(t, err)
	retried, err := c.Enqueue(ctx, report{Fail: "once"})
	require.NoError(t, err)

	queuetest.StartRunner(t, c, queue.WithMaintenance(relay), queue.WithLogger(quiet()), queue.WithPollInterval(10*time.Millisecond))
	require.Eventually(t, func() bool { return len(b.messages()) == 8 }, time.Minute, 5*time.Millisecond)
	got := map[int64][]string{}
	for _, m := range b.messages() {
		var d bridge.Data
		require.NoError(t, json.Unmarshal(m.Value, &d), "the value is the data alone")
		require.Equal(t, "application/json", m.Headers["content-type"])
		require.Equal(t, "1.0", m.Headers["ce-specversion"])
		require.Equal(t, m.ID, m.Headers["ce-id"])
		require.Equal(t, "test", m.Headers["ce-source"])
		require.Equal(t, keyOf(d.JobID), m.Headers["ce-subject"])
		at, err := time.Parse(time.RFC3339Nano, m.Headers["ce-time"])
		require.NoError(t, err)
		require.WithinDuration(t, time.Now(), at, time.Minute)
		typ := m.Headers["ce-type"]
		require.True(t, strings.HasPrefix(typ, bridge.TypePrefix), typ)
		got[d.JobID] = append(got[d.JobID], typ[len(bridge.TypePrefix):])
		if typ == bridge.Started.Type() && d.JobID == retried.Job.ID && len(got[d.JobID]) == 4 {
			require.Equal(t, 2, d.Attempt, "a start names the attempt it begins")
		}
		if d.JobID == ok.Job.ID {
			require.Equal(t, traceparent, m.Headers["traceparent"])
		}
	}
	require.Equal(t, map[int64][]string{
		ok.Job.ID:      {"created", "started", "completed"},
		retried.Job.ID: {"created", "started", "retrying", "started", "completed"},
	}, got)
}
