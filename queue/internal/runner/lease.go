package runner

// Leases: renewing the leases of the jobs a runner holds, putting back jobs
// held in its name that it does not run, and rescuing expired leases.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// renew, the renewer's Renew (see run.Renewer), renews the held claims'
// leases every third of a lease, on a connection of its own, cancels the attempts whose jobs it
// could not renew (they have lost them), and puts back the runner's orphans
// (see store.Held.Renew).
func (r *Runner) renew(ctx context.Context, conn store.Conn) error {
	r.mu.Lock()
	ids, keys := make([]int64, 0, len(r.held)), make([]int64, 0, len(r.held))
	exs := make(map[int64]*Execution, len(r.held))
	for key, ex := range r.held {
		ids, keys, exs[key] = append(ids, ex.row.ID), append(keys, key), ex
	}
	r.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, r.timeouts.renew)
	renewed, orphans, err := conn.Renew(rctx, r.cfg.Lease, ids, keys, r.cfg.ID)
	cancel()
	if err != nil {
		return err
	}
	for _, key := range renewed {
		delete(exs, key)
	}
	for _, ex := range exs {
		r.lost(ctx, ex)
	}
	r.seen(ctx, conn, false)
	return r.putBack(ctx, conn, orphans)
}

// seen writes the runner's row in the runners table (see queue.Client.Runners),
// starting or at a renewal. A failure is logged, at Debug when renewing:
// the row is only for people to look at.
func (r *Runner) seen(ctx context.Context, conn store.Conn, starting bool) {
	ctx, cancel := context.WithTimeout(ctx, r.timeouts.renew)
	defer cancel()
	err := conn.SeeRunner(ctx, store.RunnerRow{ID: r.cfg.ID, Queues: r.cfg.Queues, Workers: r.cfg.Workers}, starting)
	switch {
	case err == nil:
	case starting:
		r.log.Warn("queue: could not write the runner's row", "err", err)
	default:
		r.log.Debug("queue: could not write the runner's row", "err", err)
	}
}

// forget deletes the runner's row as it stops.
func (r *Runner) forget(conn store.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeouts.renew)
	defer cancel()
	if err := conn.ForgetRunner(ctx, r.cfg.ID); err != nil {
		r.log.Warn("queue: could not delete the runner's row", "err", err)
	}
}

// putBack puts back the orphans that renew found, but only those that the
// runner still does not hold once no claim is in flight: a claim that had run
// on the server but not yet returned to the runner when renew looked is
// launched by now. A claim the runner gave up on is never launched, so the
// keys that are left stay orphans, and putting them back by key cannot touch
// a later claim of the same job.
func (r *Runner) putBack(ctx context.Context, conn store.Conn, orphans []int64) error {
	r.claiming.Lock()
	r.mu.Lock()
	keys := make([]int64, 0, len(orphans))
	for _, key := range orphans {
		if r.held[key] == nil {
			keys = append(keys, key)
		}
	}
	r.mu.Unlock()
	r.claiming.Unlock()
	if len(keys) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeouts.renew)
	defer cancel()
	back, err := conn.PutBack(ctx, keys, r.cfg.ID)
	for _, j := range back {
		r.stats.requeued.Add(1)
		r.observe(Event{Type: EventRequeued, JobID: j.ID, Kind: j.Kind, Queue: j.Queue})
		r.log.Warn("queue: put back a job claimed in this runner's name that it was not running (its claim timed out here but ran on the server, or its result could not be written)",
			"job_id", j.ID, "kind", j.Kind)
	}
	return err
}

// lost handles an attempt whose row no longer names it: the job was
// cancelled (and the notification missed), or rescued (and perhaps claimed
// again). A running attempt is cancelled with the reason.
func (r *Runner) lost(ctx context.Context, ex *Execution) {
	ctx, cancel := context.WithTimeout(ctx, r.timeouts.statement)
	defer cancel()
	st, claims, err := ex.now(ctx)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return // unsure; look again at the next renewal
	}
	if st == statusCancelled && claims == ex.row.Claims {
		ex.cancel(r.cfg.Errors.Cancelled)
	} else {
		ex.cancel(r.cfg.Errors.LeaseLost)
	}
}

// rescuer is the maintenance task that rescues expired leases: the
// leader's runner runs it every Config.RescueEvery (see package maintain).
type rescuer struct{ r *Runner }

func (rescuer) Name() string { return "rescue" }

func (t rescuer) Run(ctx context.Context) (time.Duration, error) {
	return t.r.cfg.RescueEvery, t.r.rescue(ctx)
}

// rescue takes back jobs whose lease expired. A job rescued for the first
// time since an attempt of it last finished goes back to the queue with that
// attempt uncounted: its runner died (or froze, or lost the database) while
// it held other jobs too, so which one killed it, if any did, is not known.
// It comes back a suspect, which runners run on their own and count the
// attempts of as they start, so a suspect that is rescued again has used
// its attempt, and fails once it has used them all (reporting EventFailed
// too, for dead-letter observers). The leader rescues any runner's jobs,
// its own too; SKIP LOCKED would keep two rescuers from fighting, should a
// rescue of a leader that lost its leadership still run.
func (r *Runner) rescue(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeouts.statement)
	defer cancel()
	rescued, err := r.st.Rescue(ctx, r.cfg.ID)
	for _, j := range rescued {
		row := Row{ID: j.ID, Kind: j.Kind, Queue: j.Queue, Status: j.Status, Attempts: j.Attempts,
			MaxAttempts: j.MaxAttempts, CorrelationID: j.CorrelationID, LastError: j.LastError, Rescues: j.Rescues}
		r.stats.rescued.Add(1)
		ex := &Execution{row: row}
		r.observe(ex.event(EventRescued))
		r.jobLogger(&row).Warn("queue: rescued a job whose lease expired", "lost_by", j.LostBy, "rescued_by", r.cfg.ID,
			"now", row.Status, "rescues", row.Rescues)
		if row.Status == statusFailed {
			r.stats.failed.Add(1)
			ev := ex.event(EventFailed)
			ev.Err = fmt.Errorf("%w: %s", r.cfg.Errors.LeaseLost, *row.LastError)
			r.observe(ev)
			r.jobLogger(&row).Error("queue: job failed for good", "err", ev.Err)
		}
	}
	return err
}
