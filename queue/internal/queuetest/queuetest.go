// Package queuetest holds what the tests of package queue and of the
// packages built on it share: a migrated database, starting a runner for a
// test, waiting for its polls, and recording the events an observer sees.
package queuetest

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// StartRunner starts a runner on c with opts and stops it, letting its jobs
// finish, when the test ends.
func StartRunner(t testing.TB, c *queue.Client, opts ...queue.RunnerOption) *queue.Runner {
	t.Helper()
	r, err := queue.NewRunner(c, opts...)
	if err != nil {
		t.Fatalf("queuetest: new runner: %v", err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatalf("queuetest: start runner: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("queuetest: stop runner: %v", err)
		}
	})
	return r
}

// WaitPolls waits until each runner has begun n more polls than it had
// when called: every fetch but the last of them has run in full.
func WaitPolls(t testing.TB, n int64, rs ...*queue.Runner) {
	t.Helper()
	from := make([]int64, len(rs))
	for i, r := range rs {
		from[i] = r.Stats().Polls
	}
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for i, r := range rs {
		for r.Stats().Polls < from[i]+n {
			if time.Now().After(deadline) {
				t.Fatalf("runner %s polled %d times; waited for %d", r.ID(), r.Stats().Polls-from[i], n)
			}
			<-tick.C
		}
	}
}

// NewDB returns an empty database on the run's store that the queue's
// migrations have brought up to date (pgtest.NewMigratedDB: on
// PostgreSQL, a schema reused from an earlier test of the process).
func NewDB(t testing.TB) *pgtest.DB {
	t.Helper()
	return pgtest.NewMigratedDB(t, "queue", migrate)
}

// migrate is the queue's Migrate.
func migrate(db *gorm.DB) error {
	st, err := store.Open(db)
	if err != nil {
		return err
	}
	_, err = st.Migrate(context.Background())
	return err
}
