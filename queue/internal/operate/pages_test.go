package operate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

// Pages are checked before any statement: a bad one is refused with
// ErrInvalidOption, naming what is wrong; a good one becomes the store's
// query, with the default limit.
func TestPagesChecked(t *testing.T) {
	at := time.Date(2025, 12, 8, 23, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"ticks limit":     {errOf(TicksPage{Limit: 10_001}.Store()), "limit 10001"},
		"ticks outcome":   {errOf(TicksPage{Outcome: "lost"}.Store()), `outcome "lost"`},
		"ticks schedule":  {errOf(TicksPage{Schedule: "a\x00"}.Store()), "TicksQuery.Schedule"},
		"ticks after":     {errOf(TicksPage{After: true}.Store()), "TicksQuery.After has no At"},
		"ticks after nul": {errOf(TicksPage{After: true, AfterAt: at, AfterSchedule: "\xff"}.Store()), "TicksQuery.After.Schedule"},
		"runs limit":      {errOf(RunsPage{Limit: -1}.Store()), "limit -1"},
		"runs period":     {errOf(RunsPage{Period: "\x00"}.Store()), "RunsQuery.Period"},
		"runs after":      {errOf(RunsPage{After: true}.Store()), "RunsQuery.After has no RunID"},
		"runs after nul":  {errOf(RunsPage{After: true, AfterRunID: "r\x00"}.Store()), "RunsQuery.After.RunID"},
		"audit action":    {errOf(RecordAudit(context.Background(), nil, nil, store.AuditEntry{})), "without an action"},
		"audit actor":     {errOf(RecordAudit(context.Background(), nil, nil, store.AuditEntry{Action: "a", Actor: "\xff"})), "AuditEntry.Actor"},
		"audit json":      {errOf(RecordAudit(context.Background(), nil, nil, store.AuditEntry{Action: "a", Target: []byte("{")})), "not JSON"},
		"audit jsonb":     {errOf(RecordAudit(context.Background(), nil, nil, store.AuditEntry{Action: "a", Target: []byte(`"\u0000"`)})), "AuditEntry.Target"},
		"audit limit":     {errOf(AuditLog(context.Background(), nil, nil, 0, 1001)), "limit 1001"},
	} {
		require.ErrorIs(t, tc.err, check.ErrInvalidOption, name)
		require.Contains(t, tc.err.Error(), tc.want, name)
	}

	tq, err := TicksPage{Schedule: "nightly", Outcome: store.TickMissed, After: true, AfterAt: at, AfterSchedule: "nightly"}.Store()
	require.NoError(t, err)
	require.Equal(t, store.TicksQuery{Schedules: []string{"nightly"}, Outcomes: []string{store.TickMissed}, Before: at, BeforeSchedule: "nightly", Limit: 100}, tq)
	rq, err := RunsPage{Period: "2025-12-08", After: true, AfterRunID: "r", AfterFirst: at, Limit: 5}.Store()
	require.NoError(t, err)
	require.Equal(t, store.RunsQuery{Period: "2025-12-08", AfterFirst: at, AfterRunID: "r", Limit: 5}, rq)
}

// errOf returns the error of a call that returns a value and an error.
func errOf[T any](_ T, err error) error { return err }

// Activity refuses a query before any statement: a bucket under a second,
// a bad queue, too many buckets; a start to come has no buckets.
func TestActivityChecked(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"bucket": {errOf(Activity(ctx, nil, time.Now(), time.Millisecond, "", 10)), "at least a second"},
		"queue":  {errOf(Activity(ctx, nil, time.Now(), time.Second, "\x00", 10)), "Activity: "},
		"many":   {errOf(Activity(ctx, nil, time.Now().Add(-time.Hour), time.Second, "", 10)), "at most 10"},
	} {
		require.ErrorIs(t, tc.err, check.ErrInvalidOption, name)
		require.Contains(t, tc.err.Error(), tc.want, name)
	}
	rows, err := Activity(ctx, nil, time.Now().Add(time.Hour), time.Minute, "", 10)
	require.NoError(t, err)
	require.NotNil(t, rows)
	require.Empty(t, rows)
}
