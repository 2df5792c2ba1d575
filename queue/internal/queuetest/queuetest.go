// Package queuetest holds what the tests of package queue and of the
// packages built on it share: starting a runner for a test, waiting for
// its polls, and recording the events an observer sees.
package queuetest

import (
	"context"
	"testing"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
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
