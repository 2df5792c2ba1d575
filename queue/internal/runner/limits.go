package runner

// Limits across every runner: which claims a limit may touch. The claims
// themselves keep within the limits (see store's limits.go); the runner
// only chooses, per queue, between the plain claim and the limited one, so
// that queues no limit can touch claim as fast as ever.

import (
	"context"
	"slices"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// limitsSeen is what the runner last read of the limits in force.
type limitsSeen struct {
	at     time.Time
	any    bool            // a kind or key limit: every claim may be touched
	queues map[string]bool // queues with a limit of their own
}

// readLimits reads the limits in force once a poll interval, whether or
// not the poll's timer fires, so a limit set on another process applies
// within one. When it cannot, it keeps what it knew.
func (f *fetcher) readLimits(ctx context.Context) {
	r := f.r
	if !r.limitsStale.Swap(false) && time.Since(f.limits.at) < r.cfg.Poll {
		return
	}
	f.limits.at = time.Now()
	ctx, cancel := context.WithTimeout(ctx, r.timeouts.statement)
	defer cancel()
	ls, err := f.conn.ActiveLimits(ctx)
	if err != nil {
		r.limitsStale.Store(true)
		if ctx.Err() == nil {
			r.log.Error("queue: could not read the limits", "err", err)
		}
		return
	}
	seen := limitsSeen{at: f.limits.at, queues: map[string]bool{}}
	for _, l := range ls {
		if l.Scope == store.ScopeQueue {
			seen.queues[l.Target] = true
		} else {
			seen.any = true
		}
	}
	f.limits = seen
	r.limited.Store(seen.any || len(seen.queues) > 0)
}

// limitedQueue reports whether a limit may touch a claim on queue.
func (f *fetcher) limitedQueue(queue string) bool {
	return f.limits.any || f.limits.queues[queue]
}

// limitedQueues reports whether a limit may touch a claim on any of queues.
func (f *fetcher) limitedQueues(queues []string) bool {
	return f.limits.any || slices.ContainsFunc(queues, f.limitedQueue)
}
