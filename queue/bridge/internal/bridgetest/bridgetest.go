// Package bridgetest holds what the tests of the broker packages share: a
// queue with its outbox on, jobs whose events are known, and a publisher
// that dies after its broker acknowledged.
package bridgetest

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/bridge"
)

// Report is the tests' job kind; its handler completes it.
type Report struct{}

// Kind implements queue.Args.
func (Report) Kind() string { return "report" }

// Quiet is a logger that drops everything.
func Quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// NewQueue returns a migrated client on a fresh database, with its outbox
// on.
func NewQueue(t testing.TB) *queue.Client {
	t.Helper()
	c, _ := NewQueueDB(t)
	return c
}

// NewQueueDB is NewQueue, with the database, whose server a benchmark
// measures the CPU time of.
func NewQueueDB(t testing.TB) (*queue.Client, *pgtest.DB) {
	t.Helper()
	db := pgtest.NewDB(t)
	reg := queue.NewRegistry()
	must(t, queue.Register(reg, queue.HandlerFunc[Report](func(context.Context, *queue.Job[Report]) error { return nil })))
	c, err := queue.NewClient(db.Gorm, reg, queue.WithLogger(Quiet()))
	must(t, err)
	must(t, c.Migrate(context.Background()))
	must(t, bridge.Enable(context.Background(), c))
	return c, db
}

// Cancelled enqueues n jobs and cancels them, two events each, and
// returns their IDs as events name them.
func Cancelled(t testing.TB, c *queue.Client, n int) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for range n {
		res, err := c.Enqueue(ctx, Report{}, queue.After(time.Hour))
		must(t, err)
		_, err = c.Cancel(ctx, res.Job.ID)
		must(t, err)
		ids = append(ids, strconv.FormatInt(res.Job.ID, 10))
	}
	return ids
}

// Run makes a relay of c to pub with opts and runs a round of it, which
// must publish every event.
func Run(t testing.TB, c *queue.Client, pub bridge.Publisher, opts ...bridge.Option) {
	t.Helper()
	relay, err := bridge.NewRelay(c, pub, opts...)
	must(t, err)
	_, err = relay.Run(context.Background())
	must(t, err)
}

// RunKilled runs a round of a relay of c to pub with opts that dies
// between its broker's acknowledgement and its delete (see Killer), then
// a round of a new relay, which sends the events again.
func RunKilled(t testing.TB, c *queue.Client, pub bridge.Publisher, opts ...bridge.Option) {
	t.Helper()
	killed, kill := context.WithCancel(context.Background())
	dying, err := bridge.NewRelay(c, Killer{Publisher: pub, Kill: kill}, opts...)
	must(t, err)
	if _, err = dying.Run(killed); !errors.Is(err, context.Canceled) {
		t.Fatalf("bridgetest: the round did not die before its delete: %v", err)
	}
	Run(t, c, pub, opts...)
}

// Killer publishes through a real publisher, then calls Kill, which
// cancels the relay's round: a process that dies between its broker's
// acknowledgement and its delete.
type Killer struct {
	bridge.Publisher
	Kill func()
}

// Publish implements bridge.Publisher.
func (k Killer) Publish(ctx context.Context, msgs []bridge.Message) []error {
	errs := k.Publisher.Publish(ctx, msgs)
	k.Kill()
	return errs
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("bridgetest: %v", err)
	}
}

// AwaitJobs returns once c has n jobs, looking every 50 ms: a benchmark's
// poll of the table, which a consumer fills from elsewhere.
func AwaitJobs(t testing.TB, c *queue.Client, n int) {
	t.Helper()
	for {
		got, err := c.Count(context.Background(), queue.Filter{})
		must(t, err)
		if got == int64(n) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
