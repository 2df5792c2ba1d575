package runner

// Limits across every runner: which claims a limit may touch. The claims
// themselves keep within the limits (see store's limits.go); the runner
// only chooses, per queue, between the plain claim and the limited one, so
// that queues no limit can touch claim as fast as ever.

import (
	"slices"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// limitsSeen is what the runner last read of the limits in force.
type limitsSeen struct {
	any    bool            // a kind or key limit: every claim may be touched
	fair   bool            // a fair limit: claims take turns among keys
	queues map[string]bool // queues with a limit of their own
}

// noteLimits keeps the limits in force, as readPaused read them.
func (f *fetcher) noteLimits(ls []store.Limit) {
	seen := limitsSeen{queues: map[string]bool{}}
	tight := false
	for _, l := range ls {
		tight = tight || l.Concurrency > 0 && l.Concurrency <= f.r.cfg.Workers
		seen.fair = seen.fair || l.Fair
		if l.Scope == store.ScopeQueue {
			seen.queues[l.Target] = true
		} else {
			seen.any = true
		}
	}
	f.limits = seen
	f.r.limited.Store(seen.any || len(seen.queues) > 0)
	f.r.tight.Store(tight)
}

// limitedQueue reports whether a limit may touch a claim on queue.
func (f *fetcher) limitedQueue(queue string) bool {
	return f.limits.any || f.limits.queues[queue]
}

// limitedQueues reports whether a limit may touch a claim on any of queues.
func (f *fetcher) limitedQueues(queues []string) bool {
	return f.limits.any || slices.ContainsFunc(queues, f.limitedQueue)
}
