package queuetest

import (
	"context"
	"fmt"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// pollEvery is how often WorkDue's runner polls: the shortest interval
// queue allows, so a test waits on its jobs, not on the runner's timing.
const pollEvery = 10 * time.Millisecond

// WorkDue works, in the calling test, every job that is due in the
// runner's queues, and every job that they make due (children that
// dependency rules release, retries whose backoff ends meanwhile), and
// returns once the queues hold nothing more that is due: one runner works
// them, with opts (WithQueues, WithWorkers, WithClock, ...), and is
// stopped before WorkDue returns. It returns what the runner did; a job
// that failed and waits for its backoff is counted in Retried and stays
// QUEUED.
//
// WorkDue knows the queues are worked out when the runner, running
// nothing, has polled twice without claiming: one whole poll found nothing
// due.
func WorkDue(ctx context.Context, c *queue.Client, opts ...queue.RunnerOption) (queue.RunnerStats, error) {
	wake := make(chan struct{}, 1)
	hooks := queue.WithHooks(queue.Hooks{Observe: func(queue.Event) {
		select {
		case wake <- struct{}{}:
		default:
		}
	}})
	base := []queue.RunnerOption{queue.WithPollInterval(pollEvery), hooks}
	r, err := queue.NewRunner(c, append(base, opts...)...)
	if err != nil {
		return queue.RunnerStats{}, fmt.Errorf("queuetest: %w", err)
	}
	if err := r.Start(context.WithoutCancel(ctx)); err != nil {
		return queue.RunnerStats{}, fmt.Errorf("queuetest: %w", err)
	}
	err = idle(ctx, r, wake)
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if serr := r.Stop(stop); err == nil && serr != nil {
		err = fmt.Errorf("queuetest: stop: %w", serr)
	}
	return r.Stats(), err
}

// idle waits until r, running nothing, has begun two polls without
// claiming anything since the first.
func idle(ctx context.Context, r *queue.Runner, wake <-chan struct{}) error {
	tick := time.NewTicker(pollEvery / 2)
	defer tick.Stop()
	var mark queue.RunnerStats
	marked := false
	for {
		s := r.Stats()
		switch {
		case s.Running > 0 || !marked || s.Claimed != mark.Claimed:
			mark, marked = s, s.Running == 0
		case s.Polls >= mark.Polls+2:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("queuetest: work due jobs: %w", context.Cause(ctx))
		case <-wake:
		case <-tick.C:
		}
	}
}
