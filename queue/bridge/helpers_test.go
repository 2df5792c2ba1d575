package bridge_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/bridge"
	"github.com/sheaf-dev/sheaf/queue/internal/queuetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testexit.M(m), testexit.Option()) }

// report is the tests' job kind: its first attempt fails with Fail, if
// set, every attempt fails for good when Permanent; it completes otherwise.
type report struct {
	Fail      string `json:"fail,omitempty"`
	Permanent bool   `json:"permanent,omitempty"`
}

func (report) Kind() string { return "report" }

func work(_ context.Context, j *queue.Job[report]) error {
	switch {
	case j.Args.Permanent:
		return queue.Permanent(errString(j.Args.Fail))
	case j.Args.Fail != "" && j.Attempt == 1:
		return errString(j.Args.Fail)
	}
	return nil
}

type errString string

func (e errString) Error() string { return string(e) }

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// newClient returns a migrated client on a fresh database.
func newClient(t *testing.T) *queue.Client {
	t.Helper()
	db := queuetest.NewDB(t)
	reg := queue.NewRegistry()
	require.NoError(t, queue.Register(reg, queue.HandlerFunc[report](work), queue.MaxAttempts(2), queue.RetryBackoff(queue.Delays{})))
	c, err := queue.NewClient(db.Gorm, reg, queue.WithLogger(quiet()))
	require.NoError(t, err)
	require.NoError(t, c.Migrate(context.Background()))
	return c
}

// broker is a Publisher that keeps what it acknowledged. fail, if set,
// refuses the messages it returns an error for; acked, if set, runs after
// each call's acknowledgements, before Publish returns.
type broker struct {
	mu    sync.Mutex
	got   []bridge.Message
	fail  func(m bridge.Message) error
	acked func()
}

func (b *broker) Publish(_ context.Context, msgs []bridge.Message) []error {
	b.mu.Lock()
	var errs []error
	for i, m := range msgs {
		if b.fail != nil {
			if err := b.fail(m); err != nil {
				if errs == nil {
					errs = make([]error, len(msgs))
				}
				errs[i] = err
				continue
			}
		}
		b.got = append(b.got, m)
	}
	acked := b.acked
	b.mu.Unlock()
	if acked != nil {
		acked()
	}
	return errs
}

func (b *broker) messages() []bridge.Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]bridge.Message(nil), b.got...)
}

// events decodes msgs.
func events(t *testing.T, msgs []bridge.Message) []bridge.CloudEvent {
	t.Helper()
	out := make([]bridge.CloudEvent, len(msgs))
	for i, m := range msgs {
		require.NoError(t, json.Unmarshal(m.Value, &out[i]))
		require.Equal(t, m.ID, out[i].ID)
	}
	return out
}

// byJob lists each job's event types, in the order they were published,
// dropping copies of an ID already seen, as a consumer would.
func byJob(t *testing.T, msgs []bridge.Message) map[int64][]string {
	t.Helper()
	out, seen := map[int64][]string{}, map[string]bool{}
	for _, e := range events(t, msgs) {
		if seen[e.ID] {
			continue
		}
		seen[e.ID] = true
		out[e.Data.JobID] = append(out[e.Data.JobID], e.Type[len(bridge.TypePrefix):])
	}
	return out
}
