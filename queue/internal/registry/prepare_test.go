package registry

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue/internal/calendar"
	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/option"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
	"github.com/sheaf-dev/sheaf/worker"
)

type report struct {
	County string `json:"county"`
}

func (report) Kind() string { return "report" }

type stray struct{}

func (*stray) Kind() string { return "stray" }

var errUnknown = errors.New("unknown kind")

// priority is an option of the test's own type, as the queue's are.
type priority int

func preparer(t *testing.T) Preparer[func(), func(), *sched, priority] {
	r := New[option.Job, func(), func(), *sched](func(o option.Job) calendar.Window { return o.Window })
	require.NoError(t, r.Add(NewKind[report]("report", false, option.Job{Queue: "reports", Priority: 5, MaxAttempts: 3}, func() {})))
	return Preparer[func(), func(), *sched, priority]{Registry: r, Unknown: errUnknown,
		Apply: func(p priority, o *option.Job) error { return o.SetPriority(int(p), 1, 10) }}
}

// A job takes its kind's defaults and its own options over them, from a
// value or from JSON; the defaults are not changed.
func TestPrepareAppliesOptionsOverTheDefaults(t *testing.T) {
	t.Parallel()
	p := preparer(t)
	j, err := p.Args(report{County: "Travis"}, []priority{9})
	require.NoError(t, err)
	require.Equal(t, "report", j.Kind)
	require.Equal(t, "reports", j.Queue)
	require.Equal(t, 9, j.Priority)
	require.Equal(t, 3, j.Attempts)
	require.JSONEq(t, `{"county":"Travis"}`, j.Payload)

	j, err = p.Raw("report", []byte(`{"county":"Harris"}`), nil)
	require.NoError(t, err)
	require.Equal(t, 5, j.Priority, "the kind's default")
	require.JSONEq(t, `{"county":"Harris"}`, j.Payload)
}

// What cannot be a job is refused with the error a caller branches on.
func TestPrepareRefuses(t *testing.T) {
	t.Parallel()
	p := preparer(t)
	var nilStray *stray
	for _, tc := range []struct {
		name string
		prep func() (store.NewJob, error)
		want error
	}{
		{"nil args", func() (store.NewJob, error) { return p.Args(nil, nil) }, check.ErrInvalidPayload},
		{"nil pointer args", func() (store.NewJob, error) { return p.Args(nilStray, nil) }, check.ErrInvalidPayload},
		{"unknown kind", func() (store.NewJob, error) { return p.Args(&stray{}, nil) }, errUnknown},
		{"unknown raw kind", func() (store.NewJob, error) { return p.Raw("stray", []byte(`{}`), nil) }, errUnknown},
		{"raw of another shape", func() (store.NewJob, error) { return p.Raw("report", []byte(`[1]`), nil) }, check.ErrInvalidPayload},
		{"bad option", func() (store.NewJob, error) { return p.Args(report{}, []priority{11}) }, check.ErrInvalidOption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.prep()
			require.ErrorIs(t, err, tc.want)
		})
	}
}

// All stores all or none: the first failure names its place, and no jobs
// is refused.
func TestPrepareAll(t *testing.T) {
	t.Parallel()
	p := preparer(t)
	wrap := func(i int, err error) error { return fmt.Errorf("job %d: %w", i, err) }
	counties := []string{"Travis", "Harris"}
	rows, err := All(len(counties), func(i int) (store.NewJob, error) { return p.Args(report{County: counties[i]}, nil) }, wrap)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.JSONEq(t, `{"county":"Harris"}`, rows[1].Payload)

	_, err = All(3, func(i int) (store.NewJob, error) { return p.Args(report{}, []priority{priority(9 + i)}) }, wrap)
	require.ErrorIs(t, err, check.ErrInvalidOption)
	require.ErrorContains(t, err, "job 2: ")

	_, err = All(0, nil, wrap)
	require.ErrorIs(t, err, check.ErrInvalidOption)
}

// stampedJobs returns a build function of Stamped for jobs.
func stampedJobs(jobs ...report) func() (int, func(int) (interface{ Kind() string }, []priority)) {
	return func() (int, func(int) (interface{ Kind() string }, []priority)) {
		return len(jobs), func(i int) (interface{ Kind() string }, []priority) { return jobs[i], []priority{9} }
	}
}

// The jobs a tick or a rule creates carry its key, run and period over
// their own options; none is none; the user's panic, in the build or in a
// payload's encoding, is an error and not the runner's end.
func TestStamped(t *testing.T) {
	t.Parallel()
	p := preparer(t)
	key := func(i int) string { return fmt.Sprintf("tick:%d", i) }
	rows, err := p.Stamped(stampedJobs(report{County: "Travis"}, report{County: "Harris"}), key, "nightly@1", "2025-12-08")
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.Equal(t, "tick:1", *rows[1].Key)
	require.Equal(t, "nightly@1", *rows[1].RunID)
	require.Equal(t, "2025-12-08", *rows[1].Period)
	require.Equal(t, 9, rows[1].Priority, "the job's own options hold too")

	rows, err = p.Stamped(stampedJobs(report{}), key, "", "")
	require.NoError(t, err)
	require.Nil(t, rows[0].RunID)
	require.Nil(t, rows[0].Period)

	rows, err = p.Stamped(stampedJobs(), key, "r", "p")
	require.NoError(t, err)
	require.Empty(t, rows)

	_, err = p.Stamped(func() (int, func(int) (interface{ Kind() string }, []priority)) { panic("the user's bug") }, key, "", "")
	var pe *worker.PanicError
	require.ErrorAs(t, err, &pe)

	_, err = p.Stamped(stampedJobs(report{}), func(int) string { return "" }, "", "")
	require.ErrorIs(t, err, check.ErrInvalidOption, "an empty key")
	require.ErrorContains(t, err, "job 0: ")
}
