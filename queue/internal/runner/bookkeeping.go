package runner

// Bookkeeping: the connections, timeouts and retries of the statements a
// runner issues for itself (claims, results, renewals, rescues, requeues).

import (
	"context"
	"time"
)

// Bounds of a bookkeeping statement's timeout: a fraction of the lease (see
// newTimeouts), but never so short that a busy server's ordinary claim times
// out, nor so long that a runner cut off from the database waits out one
// statement where it could have tried several.
const (
	minStatementTimeout = time.Second
	maxStatementTimeout = 10 * time.Second
)

// timeouts are the runner's bookkeeping bounds, derived from its lease: a
// runner must be able to try a renewal several times within one lease.
type timeouts struct {
	statement time.Duration // each bookkeeping statement
	retryMax  time.Duration // longest pause between tries
	// renew bounds a lease renewal, and renewPause the pauses between its
	// tries: short, so that a runner cut off from the database tries about
	// ten times within one lease and renews soon after it is back.
	renew, renewPause time.Duration
}

func newTimeouts(lease time.Duration) timeouts {
	return timeouts{
		statement:  min(max(lease/6, minStatementTimeout), maxStatementTimeout),
		retryMax:   max(lease/10, 50*time.Millisecond),
		renew:      min(max(lease/10, 500*time.Millisecond), maxStatementTimeout),
		renewPause: max(lease/30, 20*time.Millisecond),
	}
}

// retry runs op, each try bounded by the statement timeout, until it
// succeeds or fails with an error that trying again cannot mend. It does not
// give up on a database that is slow or away: what it writes is work done
// (a result, a job put back), whose lease the lease keeper renews meanwhile,
// so waiting costs less than the work done again. The pauses between tries
// grow, and end once the runner is stopping out of time: from then on each
// write gets one try, and what it could not write is rescued later.
func (r *Runner) retry(op func(ctx context.Context, try int) error) error {
	return r.retryBy(time.Time{}, op)
}

// retryBy is retry with every try also bounded by the time by, unless it
// is zero: a stop out of time must be done before its deadline.
func (r *Runner) retryBy(by time.Time, op func(ctx context.Context, try int) error) error {
	var pause time.Duration
	for try := 0; ; try++ {
		end := time.Now().Add(r.timeouts.statement)
		if !by.IsZero() && by.Before(end) {
			end = by
		}
		ctx, cancel := context.WithDeadline(context.Background(), end)
		err := op(ctx, try)
		cancel()
		if err == nil || !r.st.Transient(err) {
			return err
		}
		if try == 0 {
			r.log.Warn("queue: bookkeeping statement failed; trying again", "err", err)
		}
		pause = min(max(2*pause, 20*time.Millisecond), r.timeouts.retryMax)
		select {
		case <-time.After(pause):
		case <-r.hard:
			return err
		}
	}
}
