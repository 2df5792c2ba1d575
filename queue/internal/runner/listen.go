package runner

// Listening: notifications of new jobs and of cancellations.

import (
	"context"
	"slices"
	"strconv"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// listen, the listener's Listen (see run.Reconnect), listens until the
// connection breaks, waking the claims for new jobs of the runner's queues
// and cancelling running jobs.
func (r *Runner) listen(ctx context.Context) error {
	ready := func() { // jobs may have arrived, and queues paused, while the listener was down
		r.pausedStale.Store(true)
		r.wakeFetch()
	}
	return r.st.Listen(ctx, ready, func(channel, payload string) {
		switch channel {
		case store.JobsChannel:
			q, prio, suspects := parseNotice(payload)
			if !slices.Contains(r.cfg.Queues, q) {
				return
			}
			if suspects {
				r.suspects.Store(true)
			} else {
				r.noteArrival(q, prio)
			}
			r.wakeFetch()
		case store.QueuesChannel:
			if slices.Contains(r.cfg.Queues, payload) {
				r.pausedStale.Store(true)
				r.wakeFetch()
			}
		case store.CancelChannel:
			if id, err := strconv.ParseInt(payload, 10, 64); err == nil {
				r.cancelRunning(id, r.cfg.Errors.Cancelled)
			}
		}
	})
}
