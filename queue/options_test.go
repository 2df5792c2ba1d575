package queue_test

import (
	"context"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
)

// Each option is accepted where it applies, as the compiler checks here...
var (
	_ queue.ClientOption = queue.WithLogger(nil)
	_ queue.RunnerOption = queue.WithLogger(nil)
	_ queue.ClientOption = queue.WithHooks(queue.Hooks{})
	_ queue.RunnerOption = queue.WithHooks(queue.Hooks{})
	_ queue.RunnerOption = queue.WithWorkers(1)

	_ queue.RegisterOption = queue.Priority(1)
	_ queue.EnqueueOption  = queue.Priority(1)
	_ queue.RegisterOption = queue.Timeout(time.Second)
	_ queue.ChunkedOption  = queue.Timeout(time.Second)
	_ queue.ChunkedOption  = queue.ChunkSize(1)
	_ queue.EnqueueOption  = queue.RunAt(time.Time{})

	_ queue.Clock = queue.SystemClock{}
)

// ...and refused where it does not: no option's value implements the
// interface of a place it does not apply to, so passing it there does not
// compile.
func TestOptionsApplyWhereTheySay(t *testing.T) {
	t.Parallel()
	const (
		client = 1 << iota
		runner
		register
		chunked
		enqueue
	)
	places := map[int]reflect.Type{
		client:   reflect.TypeFor[queue.ClientOption](),
		runner:   reflect.TypeFor[queue.RunnerOption](),
		register: reflect.TypeFor[queue.RegisterOption](),
		chunked:  reflect.TypeFor[queue.ChunkedOption](),
		enqueue:  reflect.TypeFor[queue.EnqueueOption](),
	}
	kindOrJob := register | chunked | enqueue
	for name, c := range map[string]struct {
		opt   any
		where int
	}{
		"WithLogger":         {queue.WithLogger(slog.Default()), client | runner},
		"WithObserver":       {queue.WithObserver(nil), client | runner},
		"WithHooks":          {queue.WithHooks(queue.Hooks{}), client | runner},
		"WithWorkers":        {queue.WithWorkers(1), runner},
		"WithQueues":         {queue.WithQueues("q"), runner},
		"WithPollInterval":   {queue.WithPollInterval(time.Second), runner},
		"WithLease":          {queue.WithLease(time.Second), runner},
		"WithRescueInterval": {queue.WithRescueInterval(time.Second), runner},
		"WithRunnerID":       {queue.WithRunnerID("r"), runner},
		"WithClock":          {queue.WithClock(queue.SystemClock{}), client | runner},
		"OnQueue":            {queue.OnQueue("q"), kindOrJob},
		"Priority":           {queue.Priority(1), kindOrJob},
		"MaxAttempts":        {queue.MaxAttempts(1), kindOrJob},
		"RetryBackoff":       {queue.RetryBackoff(queue.Delays{0}), kindOrJob},
		"Timeout":            {queue.Timeout(time.Second), register | chunked},
		"During":             {queue.During(queue.Window{}), register | chunked},
		"ChunkSize":          {queue.ChunkSize(1), chunked},
		"RunAt":              {queue.RunAt(time.Now()), enqueue},
		"After":              {queue.After(time.Second), enqueue},
		"IdempotencyKey":     {queue.IdempotencyKey("k"), enqueue},
		"CorrelationID":      {queue.CorrelationID("c"), enqueue},
		"AuthContext":        {queue.AuthContext(nil), enqueue},
		"InRun":              {queue.InRun("r"), enqueue},
		"InPeriod":           {queue.InPeriod("p"), enqueue},
		"TraceContext":       {queue.TraceContext("t", ""), enqueue},
	} {
		for place, iface := range places {
			require.Equal(t, c.where&place != 0, reflect.TypeOf(c.opt).Implements(iface), "%s as %v", name, iface)
		}
	}
}

func TestStatusesIsACopy(t *testing.T) {
	t.Parallel()
	s := queue.Statuses()
	s[0] = "EDITED"
	require.Equal(t, queue.StatusQueued, queue.Statuses()[0])
	require.Len(t, queue.Statuses(), 5)
}

// TestNilAndZeroOptionsAreRefused: the compiler lets a nil interface and a
// zero JobOption or InstrumentOption through; each entry point refuses
// them, naming the type.
func TestNilAndZeroOptionsAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	r := queue.NewRegistry()
	_, err := queue.NewClient(e.db.Gorm, e.reg, nil)
	require.ErrorContains(t, err, "nil ClientOption")
	_, err = queue.NewClient(e.db.Gorm, e.reg, queue.InstrumentOption{})
	require.ErrorContains(t, err, "zero InstrumentOption")
	_, err = queue.NewRunner(e.client, nil)
	require.ErrorContains(t, err, "nil RunnerOption")
	_, err = queue.NewRunner(e.client, queue.InstrumentOption{})
	require.ErrorContains(t, err, "zero InstrumentOption")
	_, err = queue.NewClient(e.db.Gorm, e.reg, queue.ClockOption{})
	require.ErrorContains(t, err, "nil Clock")
	_, err = queue.NewRunner(e.client, queue.WithClock(nil))
	require.ErrorContains(t, err, "nil Clock")
	require.ErrorContains(t, queue.Register(r, nopHandler[noop](), nil), "nil RegisterOption")
	require.ErrorContains(t, queue.Register(r, nopHandler[noop](), queue.JobOption{}), "zero JobOption")
	require.ErrorContains(t, queue.RegisterChunked[countyReport, int](r, &reportWriter{}, nil), "nil ChunkedOption")
	_, err = e.client.Enqueue(ctx, noop{}, nil)
	require.ErrorContains(t, err, "nil EnqueueOption")
	_, err = e.client.Enqueue(ctx, noop{}, queue.JobOption{})
	require.ErrorContains(t, err, "zero JobOption")
	require.Empty(t, r.Kinds())
	n, err := e.client.Count(ctx, queue.Filter{})
	require.NoError(t, err)
	require.Zero(t, n)
}
