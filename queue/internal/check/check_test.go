package check

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

// NotMigrated wraps what store.Unmigrated says is a missing migration in
// ErrNotMigrated, the database's error still in the chain, and returns any
// other error as it is.
func TestNotMigratedWrapsMissingMigrations(t *testing.T) {
	missing := fmt.Errorf("queue: enqueue: %w", &pgconn.PgError{Severity: "ERROR", Code: "42P01", Message: `relation "sheaf_jobs" does not exist`})
	got := NotMigrated(missing)
	require.ErrorIs(t, got, ErrNotMigrated)
	var pe *pgconn.PgError
	require.ErrorAs(t, got, &pe, "the database's error stays in the chain")
	other := fmt.Errorf("queue: enqueue: %w", &pgconn.PgError{Severity: "ERROR", Code: "42P01", Message: `relation "orders" does not exist`})
	require.Same(t, other, NotMigrated(other))
	require.NoError(t, NotMigrated(nil))
	ctx := context.Background()
	require.NoError(t, Failed(ctx, "count", nil))
	require.ErrorIs(t, Failed(ctx, "count", missing), ErrNotMigrated)
	require.ErrorAs(t, Failed(ctx, "count", missing), &pe)
	require.EqualError(t, Failed(ctx, "count", missing),
		"queue: count: schema not migrated; call Client.Migrate: "+missing.Error(), "said once, after the operation")
	require.EqualError(t, Failed(ctx, "count", errors.New("boom")), "queue: count: boom")
}

// A call whose context ended fails with an error that matches the
// context's, whatever the driver returned for the interrupted statement,
// and keeps the driver's error in the chain.
func TestFailedSaysTheContextEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	timeout := &net.OpError{Op: "write", Net: "tcp", Err: os.ErrDeadlineExceeded}
	err := Failed(ctx, "count", timeout)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.EqualError(t, err, "queue: count: context canceled: write tcp: i/o timeout")
	already := Failed(ctx, "count", fmt.Errorf("read: %w", context.Canceled))
	require.EqualError(t, already, "queue: count: read: context canceled", "an error that says so already is left alone")
}

func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string // "" for nil
	}{
		{Within("lease", time.Minute, time.Second, 24*time.Hour), ""},
		{Within("lease", 25*time.Hour, time.Second, 24*time.Hour), "lease 25h0m0s not in [1s, 24h]"},
		{Within("workers", 0, 1, 10), "workers 0 not in [1, 10]"},
		{Text("OnQueue", "a\x00b"), "OnQueue: "},
		{Text("OnQueue", "ok"), ""},
		{Texts("A", "ok", "B", "\xff"), "B: "},
		{Name("InRun", "run ID", "", 5), "run ID must have 1 to 5 bytes"},
		{Name("InRun", "run ID", "123456", 5), "run ID must have 1 to 5 bytes"},
		{QueueName("WithQueues", string(make([]byte, MaxQueueName+1))), "WithQueues: queue name"},
		{QueueName("WithQueues", "default"), ""},
		{Raw([]byte(`{"a":"\u0000"}`)), "payload: "},
		{Raw([]byte(`{"a":1}`)), ""},
		{Encoded("args", "\xff", []byte(`"\ufffd"`), false), "args"},
	} {
		if tc.want == "" {
			require.NoError(t, tc.err)
			continue
		}
		require.Error(t, tc.err)
		require.Contains(t, tc.err.Error(), tc.want)
		require.True(t, errors.Is(tc.err, ErrInvalidOption) || errors.Is(tc.err, ErrInvalidPayload), tc.err)
	}
}

func TestSetAndPageLimit(t *testing.T) {
	v := 1
	require.NoError(t, Set(&v, 2, nil))
	require.Equal(t, 2, v)
	require.Error(t, Set(&v, 3, Invalid("no")))
	require.Equal(t, 2, v, "a refused value is not set")

	for limit, want := range map[int]int{0: 100, 7: 7, 1000: 1000} {
		got, err := PageLimit(limit, 1000)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	for _, bad := range []int{-1, 1001} {
		_, err := PageLimit(bad, 1000)
		require.ErrorIs(t, err, ErrInvalidOption)
	}
}

type option interface{ apply(*int) error }

type add int

func (a add) apply(n *int) error { *n += int(a); return Refuse(a < 0, "negative %d", a) }

func TestEach(t *testing.T) {
	n := 0
	apply := func(o option) error { return o.apply(&n) }
	require.NoError(t, Each("option", []option{add(1), add(2)}, apply))
	require.Equal(t, 3, n)
	require.EqualError(t, Each("option", []option{add(1), nil}, apply), "queue: invalid option: nil option")
	require.ErrorIs(t, Each("option", []option{add(-1)}, apply), ErrInvalidOption)
}
