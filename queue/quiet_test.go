package queue_test

import (
	"context"
	"log"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
)

// On a gorm handle whose logger writes every statement (Info) and calls
// every one slow, the queue's own statements, batches of thousands of ids,
// write no line of their own: enqueueing many, in a transaction of the
// caller's too, waiting for them and running them. The caller's statements
// on the same handle and transaction are logged as they were.
func TestTheQueuesStatementsAreNotLogged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	var out logged
	db, err := pgtest.OpenDSN(e.db.DSN, &gorm.Config{Logger: logger.New(log.New(lockedWriter{&out.mu, &out.buf}, "", 0),
		logger.Config{SlowThreshold: time.Nanosecond, LogLevel: logger.Info})})
	require.NoError(t, err)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	t.Cleanup(func() { _ = sqlDB.Close() })
	c, err := queue.NewClient(db, e.reg, quiet())
	require.NoError(t, err)
	ctx := context.Background()

	params := make([]queue.Params, 2_000)
	for i := range params {
		params[i].Args = noop{}
	}
	out1, err := c.EnqueueMany(ctx, params)
	require.NoError(t, err)
	var out2 []queue.Enqueued
	require.NoError(t, db.Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("SELECT 'the caller''s own statement'").Error; err != nil {
			return err
		}
		out2, err = c.Tx(tx).EnqueueMany(ctx, params[:500])
		return err
	}))
	jobIDs := ids(append(out1, out2...))
	r, err := queue.NewRunner(c, queue.WithPollInterval(50*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, r.Start(ctx))
	jobs, err := c.Wait(ctx, jobIDs...)
	require.NoError(t, err)
	require.NoError(t, r.Stop(ctx))
	for _, j := range jobs {
		require.Equal(t, queue.StatusCompleted, j.Status)
	}
	require.NoError(t, db.Exec("SELECT 'another of the caller''s'").Error)

	logged := out.String()
	require.Contains(t, logged, "the caller''s own statement", "the caller's statements in their transaction are logged")
	require.Contains(t, logged, "another of the caller''s", "the caller's statements are logged")
	for line := range strings.Lines(logged) {
		require.LessOrEqual(t, len(line), 300, "a line of the log: %.300s…", line)
	}
	require.Equal(t, 2, strings.Count(logged, "SLOW SQL"), "the caller's two statements, none of the queue's:\n%s", logged)
}
