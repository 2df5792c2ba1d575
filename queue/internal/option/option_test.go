package option

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/limit"
	"github.com/sheaf-dev/sheaf/queue/internal/maintain"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

// A refused setting leaves the field as it was and says why with
// ErrInvalidOption; an accepted one sets it.
func TestSettersRefuseBadValuesAndKeepTheField(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 513)
	for _, tc := range []struct {
		name string
		set  func(*Job, *Runner) error
		want string // part of the error, "" for none
	}{
		{"queue", func(o *Job, _ *Runner) error { return o.SetQueue("") }, "OnQueue"},
		{"priority", func(o *Job, _ *Runner) error { return o.SetPriority(11, 1, 10) }, "priority 11 not in [1, 10]"},
		{"attempts", func(o *Job, _ *Runner) error { return o.SetMaxAttempts(0) }, "max attempts 0"},
		{"timeout", func(o *Job, _ *Runner) error { return o.SetTimeout(0) }, "timeout 0s not positive"},
		{"chunk", func(o *Job, _ *Runner) error { return o.SetChunkSize(9, 8) }, "chunk size 9"},
		{"run at", func(o *Job, _ *Runner) error { return o.SetRunAt(time.Time{}) }, "zero RunAt time"},
		{"delay", func(o *Job, _ *Runner) error { return o.SetDelay(-time.Second) }, "negative delay"},
		{"key", func(o *Job, _ *Runner) error { return o.SetKey("") }, "idempotency key"},
		{"correlation long", func(o *Job, _ *Runner) error { return o.SetCorrelation(long) }, "longer than 512"},
		{"correlation NUL", func(o *Job, _ *Runner) error { return o.SetCorrelation("a\x00") }, "CorrelationID"},
		{"run ID", func(o *Job, _ *Runner) error { return o.SetRunID(long) }, "run ID"},
		{"period", func(o *Job, _ *Runner) error { return o.SetPeriod("") }, "period"},
		{"traceparent", func(o *Job, _ *Runner) error { return o.SetTrace("", "") }, "traceparent"},
		{"tracestate", func(o *Job, _ *Runner) error { return o.SetTrace("00-a", "\xff") }, "TraceContext"},
		{"stamp", func(o *Job, _ *Runner) error { return o.Stamp("", "run", "period") }, "idempotency key"},
		{"workers", func(_ *Job, r *Runner) error { return r.SetWorkers(0, 10) }, "workers 0"},
		{"no queues", func(_ *Job, r *Runner) error { return r.SetQueues(nil) }, "at least one queue"},
		{"bad queue", func(_ *Job, r *Runner) error { return r.SetQueues([]string{"a", ""}) }, "WithQueues"},
		{"poll", func(_ *Job, r *Runner) error { return r.SetPoll(time.Millisecond) }, "poll interval"},
		{"lease", func(_ *Job, r *Runner) error { return r.SetLease(time.Millisecond) }, "lease"},
		{"rescue", func(_ *Job, r *Runner) error { return r.SetRescueEvery(25 * time.Hour) }, "rescue interval"},
		{"runner ID", func(_ *Job, r *Runner) error { return r.SetID("") }, "runner ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, r := Job{Queue: "q", Priority: 5}, Runner{Workers: 3, Queues: []string{"q"}}
			err := tc.set(&o, &r)
			require.ErrorIs(t, err, check.ErrInvalidOption)
			require.ErrorContains(t, err, tc.want)
			require.Equal(t, Job{Queue: "q", Priority: 5}, o)
			require.Equal(t, Runner{Workers: 3, Queues: []string{"q"}}, r)
		})
	}
}

// Row carries the settings into the row, leaving unset ones NULL, and
// refuses claims that do not encode.
func TestRow(t *testing.T) {
	t.Parallel()
	var o Job
	require.NoError(t, o.SetQueue("reports"))
	require.NoError(t, o.SetPriority(7, 1, 10))
	require.NoError(t, o.SetKey("k"))
	require.NoError(t, o.SetTrace("00-abc", ""))
	require.NoError(t, o.SetAuth(map[string]any{"role": "clerk"}))
	j, err := o.Row("report", []byte(`{}`))
	require.NoError(t, err)
	require.Equal(t, "report", j.Kind)
	require.Equal(t, "reports", j.Queue)
	require.Equal(t, 7, j.Priority)
	require.Equal(t, "k", *j.Key)
	require.Nil(t, j.Correlation)
	require.Nil(t, j.RunAt)
	require.NotNil(t, j.Metadata)
	require.JSONEq(t, `{"role":"clerk"}`, *j.Auth)

	require.NoError(t, o.SetAuth(map[string]any{"f": func() {}}))
	_, err = o.Row("report", []byte(`{}`))
	require.Error(t, err)

	// The runner's queues are a copy of the caller's.
	var r Runner
	names := []string{"a", "b"}
	require.NoError(t, r.SetQueues(names))
	names[0] = "z"
	require.Equal(t, []string{"a", "b"}, r.Queues)
}

// A job's own backoff and its limit key go into the row; a kind's backoff
// does not, and a payload the key function cannot read is refused.
func TestRowCarriesOwnBackoffAndLimitKey(t *testing.T) {
	t.Parallel()
	key, err := limit.KeyOf(func(a struct{ Customer string }) string { return a.Customer })
	require.NoError(t, err)
	o := Job{LimitKey: key}
	j, err := o.Row("report", []byte(`{"Customer":"acme"}`))
	require.NoError(t, err)
	require.Nil(t, j.Backoff, "a kind's backoff stays with the kind")
	require.Equal(t, "acme", *j.LimitKey)

	o.OwnBackoff = []byte(`{"delays":[1000]}`)
	j, err = o.Row("report", []byte(`{"Customer":"acme"}`))
	require.NoError(t, err)
	require.Equal(t, `{"delays":[1000]}`, *j.Backoff)

	_, err = o.Row("report", []byte(`[]`))
	require.ErrorIs(t, err, check.ErrInvalidPayload)
	j, err = (&Job{}).Row("report", []byte(`{}`))
	require.NoError(t, err)
	require.Nil(t, j.LimitKey, "no key function, no key")
}

// A declared limit is kept with its scope; one that caps nothing is
// refused.
func TestDeclare(t *testing.T) {
	t.Parallel()
	var o Job
	require.NoError(t, o.Declare(store.ScopeKey, limit.Declared{Concurrency: 2}))
	require.Equal(t, []limit.Declared{{Scope: store.ScopeKey, Concurrency: 2}}, o.Limits)
	require.ErrorIs(t, o.Declare(store.ScopeKind, limit.Declared{}), check.ErrInvalidOption)
}

type task string

func (t task) Name() string                             { return string(t) }
func (task) Run(context.Context) (time.Duration, error) { return time.Minute, nil }

// A runner campaigns with the client's upkeep and then its own tasks, or,
// without maintenance, campaigns not and may have no tasks; a nil task is
// refused.
func TestCampaign(t *testing.T) {
	t.Parallel()
	upkeep := func() []maintain.Task { return []maintain.Task{task("prune")} }
	var r Runner
	require.NoError(t, r.AddTasks([]maintain.Task{task("alerts")}))
	on, tasks, err := r.Campaign(upkeep)
	require.NoError(t, err)
	require.True(t, on)
	require.Equal(t, []maintain.Task{task("prune"), task("alerts")}, tasks)

	r.NoCampaign = true
	_, _, err = r.Campaign(upkeep)
	require.ErrorIs(t, err, check.ErrInvalidOption)
	on, tasks, err = (&Runner{NoCampaign: true}).Campaign(upkeep)
	require.NoError(t, err)
	require.False(t, on)
	require.Empty(t, tasks)

	err = r.AddTasks([]maintain.Task{task("a"), nil})
	require.ErrorContains(t, err, "task 1 is nil")
	require.Len(t, r.Tasks, 1, "nothing added")
}
