package sqlitedb_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/sqlitedb"
)

// warnings keeps the messages of the records at Warn and above.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, lvl slog.Level) bool { return lvl >= slog.LevelWarn }
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler             { return w }
func (w *warnings) WithGroup(string) slog.Handler                  { return w }
func (w *warnings) Handle(_ context.Context, rec slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, rec.Message)
	return nil
}

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.msgs)
}

// A runner with the default options on the pool Open returns, its every
// worker's handler holding a connection at once, finds the pool sized for
// it: no connection is closed for want of idle room, and nothing is
// logged at Warn.
func TestOpenSizesThePoolForADefaultRunner(t *testing.T) {
	t.Parallel()
	db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "jobs.db"))
	require.NoError(t, err)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	t.Cleanup(func() { _ = sqlDB.Close() })

	var arrived atomic.Int32
	all := make(chan struct{}) // closed when every handler holds a connection
	reg := queue.NewRegistry()
	require.NoError(t, queue.Register(reg, queue.HandlerFunc[hello](func(ctx context.Context, _ *queue.Job[hello]) error {
		conn, err := sqlDB.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		if arrived.Add(1) == queue.DefaultWorkers {
			close(all)
		}
		select {
		case <-all:
			return conn.PingContext(ctx)
		case <-ctx.Done():
			return ctx.Err()
		}
	})))
	w := &warnings{}
	ctx := context.Background()
	client, err := queue.NewClient(db, reg, queue.WithLogger(slog.New(w)))
	require.NoError(t, err)
	require.NoError(t, client.Migrate(ctx))
	runner, err := queue.NewRunner(client)
	require.NoError(t, err)
	require.NoError(t, runner.Start(ctx))
	params := make([]queue.Params, queue.DefaultWorkers)
	for i := range params {
		params[i].Args = hello{}
	}
	out, err := client.EnqueueMany(ctx, params)
	require.NoError(t, err)
	ids := make([]int64, len(out))
	for i, e := range out {
		ids[i] = e.Job.ID
	}
	jobs, err := client.Wait(ctx, ids...)
	require.NoError(t, err)
	require.NoError(t, runner.Stop(ctx))
	for _, j := range jobs {
		require.Equal(t, queue.StatusCompleted, j.Status)
	}
	require.Zero(t, sqlDB.Stats().MaxIdleClosed, "connections closed for want of idle room")
	// A loaded machine may keep a job claimed ahead waiting for a worker
	// long enough to be put back, or a lease's renewal waiting for the
	// file: warnings about the machine, not the pool.
	require.Empty(t, slices.DeleteFunc(w.all(), func(m string) bool {
		return m == "queue: jobs put back in the queue" || m == "queue: lease renewal failed; trying again"
	}))
}

// A file that cannot be opened fails Open, naming it, rather than the
// first statement.
func TestOpenFailsOnAFileItCannotOpen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "no such folder", "jobs.db")
	_, err := sqlitedb.Open(path)
	require.ErrorContains(t, err, "sqlitedb: open "+path+": ")
}
