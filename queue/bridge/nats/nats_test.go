package nats_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/bridge"
	"github.com/sheaf-dev/sheaf/queue/bridge/internal/bridgetest"
	"github.com/sheaf-dev/sheaf/queue/bridge/nats"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(anchored{m}, testexit.Option()) }

// anchored runs the tests with a stream of the shared server's kept
// throughout: when an account's last stream is deleted, nats-server
// removes the account's store directory, and a test creating its stream
// at that moment failed ("could not create storage directory"); with one
// stream that outlives the tests, the directory stays.
type anchored struct{ m *testing.M }

func (a anchored) Run() int {
	nc, err := natsgo.Connect(serverURL())
	if err != nil {
		return a.m.Run() // the tests say whether they need the server
	}
	defer nc.Close()
	name := fmt.Sprintf("sheaf_test_anchor_%d_%d", os.Getpid(), time.Now().UnixNano())
	if js, err := jetstream.New(nc); err == nil {
		ctx := context.Background()
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}}); err == nil {
			defer func() { _ = js.DeleteStream(context.Background(), name) }()
		}
	}
	return a.m.Run()
}

// serverURL is the shared nats-server's.
func serverURL() string {
	if u := os.Getenv("NATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

var streams atomic.Int64

// connect connects to url, skipping the test (failing it under CI) when
// no server answers.
func connect(t testing.TB, url string, opts ...natsgo.Option) (*natsgo.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := natsgo.Connect(url, opts...)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("nats-server at %s: %v", url, err)
		}
		t.Skipf("no nats-server at %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

// stream creates a stream of its own for the test, and returns it with
// the relay options that publish into it.
func stream(t *testing.T, js jetstream.JetStream) (jetstream.Stream, []bridge.Option) {
	t.Helper()
	name := fmt.Sprintf("sheaf_test_%d_%d", os.Getpid(), streams.Add(1))
	ctx := context.Background()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	opts := []bridge.Option{bridge.WithLogger(bridgetest.Quiet())}
	for _, e := range bridge.Events {
		opts = append(opts, bridge.WithTopic(e, name+"."+string(e)))
	}
	return s, opts
}

// messages reads the stream's first n messages, in order.
func messages(t *testing.T, s jetstream.Stream, n int) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	var msgs []jetstream.Msg
	for len(msgs) < n {
		m, err := cons.Next(jetstream.FetchMaxWait(time.Second))
		require.NoError(t, err, "%d of %d messages", len(msgs), n)
		msgs = append(msgs, m)
	}
	return msgs
}

// read reads the stream's messages from its start, in order, until it
// has n, and the events in them, by job.
func read(t *testing.T, s jetstream.Stream, n int) ([]jetstream.Msg, map[string][]string) {
	t.Helper()
	msgs := messages(t, s, n)
	byJob := map[string][]string{}
	for _, m := range msgs {
		var e bridge.CloudEvent
		require.NoError(t, json.Unmarshal(m.Data(), &e))
		byJob[e.Subject] = append(byJob[e.Subject], e.Type[len(bridge.TypePrefix):])
	}
	return msgs, byJob
}

// setupRelay starts a relay test, in parallel: a stream of the test's own
// and the relay's options for it, a publisher to it, and a queue with its
// outbox on.
func setupRelay(t *testing.T) (jetstream.Stream, []bridge.Option, *nats.Publisher, *queue.Client) {
	t.Helper()
	t.Parallel()
	_, js := connect(t, serverURL())
	s, opts := stream(t, js)
	pub, err := nats.NewPublisher(js, 0)
	require.NoError(t, err)
	return s, opts, pub, bridgetest.NewQueue(t)
}

// A relay publishes to JetStream, each event on its subject, in order per
// job, with the job's trace context in the headers.
func TestRelayToJetStream(t *testing.T) {
	s, opts, pub, c := setupRelay(t)
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	res, err := c.Enqueue(context.Background(), bridgetest.Report{}, queue.TraceContext(tp, ""))
	require.NoError(t, err)
	jobs := bridgetest.Cancelled(t, c, 3)
	bridgetest.Run(t, c, pub, opts...)

	msgs, byJob := read(t, s, 7)
	require.Equal(t, []string{"created"}, byJob[strconv.FormatInt(res.Job.ID, 10)])
	for _, j := range jobs {
		require.Equal(t, []string{"created", "cancelled"}, byJob[j])
	}
	require.Equal(t, tp, msgs[0].Headers().Get("traceparent"))
	require.Equal(t, bridge.ContentType, msgs[0].Headers().Get("content-type"))
	require.Equal(t, s.CachedInfo().Config.Name+".created", msgs[0].Subject())
}

// In binary mode the attributes are NATS headers under "ce-", and the
// message's data is the event's data.
func TestRelayToJetStreamInBinaryMode(t *testing.T) {
	s, opts, pub, c := setupRelay(t)
	res, err := c.Enqueue(context.Background(), bridgetest.Report{})
	require.NoError(t, err)
	bridgetest.Run(t, c, pub, append(opts, bridge.WithBinaryMode())...)

	m := messages(t, s, 1)[0]
	require.Equal(t, bridge.Created.Type(), m.Headers().Get("ce-type"))
	require.Equal(t, strconv.FormatInt(res.Job.ID, 10), m.Headers().Get("ce-subject"))
	require.Equal(t, "application/json", m.Headers().Get("content-type"))
	var d bridge.Data
	require.NoError(t, json.Unmarshal(m.Data(), &d))
	require.Equal(t, res.Job.ID, d.JobID)
}

// A relay killed between JetStream's acknowledgement and its delete sends
// the events again, with the same IDs: JetStream drops the copies by
// Nats-Msg-Id, so the stream holds each event once.
func TestRelayKilledMidBatchIsDeduplicated(t *testing.T) {
	s, opts, pub, c := setupRelay(t)
	jobs := bridgetest.Cancelled(t, c, 3)
	bridgetest.RunKilled(t, c, pub, opts...)

	_, byJob := read(t, s, 6)
	for _, j := range jobs {
		require.Equal(t, []string{"created", "cancelled"}, byJob[j])
	}
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, uint64(6), info.State.Msgs, "the copies were dropped")
}

// ownServer runs a nats-server of the test's own on port, keeping its
// streams in dir, until stop.
func ownServer(t *testing.T, port int, dir string) (stop func()) {
	t.Helper()
	cmd := exec.Command("/usr/sbin/nats-server", "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", dir)
	if err := cmd.Start(); err != nil {
		t.Skipf("no nats-server to run: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stop = func() {
		_ = cmd.Process.Kill()
		<-done
	}
	t.Cleanup(stop)
	return stop
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// While the server is away, events wait in the outbox; once it is back,
// they all arrive, in order per job, none lost.
func TestJetStreamAwayForAWhile(t *testing.T) {
	t.Parallel()
	port, dir := freePort(t), t.TempDir()
	stop := ownServer(t, port, dir)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	var js jetstream.JetStream
	require.Eventually(t, func() bool {
		nc, err := natsgo.Connect(url, natsgo.MaxReconnects(-1), natsgo.ReconnectWait(20*time.Millisecond))
		if err != nil {
			return false
		}
		t.Cleanup(nc.Close)
		js, err = jetstream.New(nc)
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	s, opts := stream(t, js)
	pub, err := nats.NewPublisher(js, 300*time.Millisecond)
	require.NoError(t, err)
	c := bridgetest.NewQueue(t)
	relay, err := bridge.NewRelay(c, pub, append(opts, bridge.WithBatch(3))...)
	require.NoError(t, err)

	stop()
	jobs := bridgetest.Cancelled(t, c, 5)
	_, err = relay.Run(context.Background())
	require.Error(t, err, "the server is away")
	ownServer(t, port, dir)
	require.Eventually(t, func() bool { _, err := relay.Run(context.Background()); return err == nil }, 20*time.Second, 20*time.Millisecond)

	_, byJob := read(t, s, 10)
	for _, j := range jobs {
		require.Equal(t, []string{"created", "cancelled"}, byJob[j])
	}
}

func TestNewPublisherRefusesNil(t *testing.T) {
	_, err := nats.NewPublisher(nil, 0)
	require.True(t, errors.Is(err, bridge.ErrInvalid))
}
