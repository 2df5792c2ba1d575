package queue

// Completing: the completer writes finished attempts, many per statement.

import (
	"context"
	"errors"
	"time"
)

// maxFlush caps the completions written by one statement.
const maxFlush = 2000

// completeLinger is how long the completer waits for more results when it
// has fewer than batch of them and jobs are running.
var completeLinger = struct {
	wait  time.Duration
	batch int
}{time.Millisecond, 50}

// result is a finished attempt on its way to the database.
type result struct {
	ex     *execution
	status Status // COMPLETED, QUEUED (retry) or FAILED
	delay  time.Duration
	err    error
	took   time.Duration
}

// complete writes finished attempts, many per statement: whatever has
// arrived while the previous statement ran goes into the next.
func (r *Runner) complete() {
	defer r.completer.Done()
	conn := &heldConn{db: r.sqlDB}
	defer conn.close()
	batch := make([]result, 0, maxFlush)
	linger := time.NewTimer(0)
	defer linger.Stop()
	for res := range r.results {
		batch = append(batch[:0], res)
		// Gather what is there; while the batch is small and jobs are
		// running, wait a moment for their results too. A statement and a
		// commit per handful of jobs would cost more than the wait.
		lingering := false
	drain:
		for len(batch) < maxFlush {
			select {
			case more, ok := <-r.results:
				if !ok {
					break drain
				}
				batch = append(batch, more)
				continue
			default:
			}
			if lingering || len(batch) >= completeLinger.batch || r.Stats().Running == 0 {
				break
			}
			lingering = true
			linger.Reset(completeLinger.wait)
			select {
			case more, ok := <-r.results:
				if !ok {
					break drain
				}
				batch = append(batch, more)
			case <-linger.C:
				break drain
			}
		}
		r.flush(conn, batch)
	}
}

// A claim is named by its job ID and claim number, packed into one number,
// its key, so that a guard on many claims is one hashed = ANY. The claim
// number is taken modulo 2^20: two claims of one job that far apart are
// never both held. IDs stay below 2^43, eight trillion jobs.
func keyOf(ex *execution) int64 { return ex.row.ID<<20 + int64(ex.row.Claims)&(1<<20-1) }

// claimKey is keyOf in SQL, for the rows of table alias a.
func claimKey(a string) string { return "(" + a + ".id * 1048576 + " + a + ".claims % 1048576)" }

// completeSQL finishes successful attempts: the bulk of all results, so it
// carries nothing per row but the IDs and their claim keys, and the planner
// reaches the rows through the primary key.
var completeSQL = `
UPDATE sheaf_jobs j SET status = 'COMPLETED', completed_at = now(), locked_until = NULL, locked_by = NULL, rescues = 0
WHERE j.id = ANY($1) AND ` + claimKey("j") + ` = ANY($2) AND j.status = 'PROCESSING'
RETURNING j.id`

// completedSQL finds, among claims ($1, $2) whose completion was sent but
// not acknowledged, those whose completion landed: a job is COMPLETED with
// a claim's key only by that claim's completion.
var completedSQL = `SELECT j.id FROM sheaf_jobs j
WHERE j.id = ANY($1) AND ` + claimKey("j") + ` = ANY($2) AND j.status = 'COMPLETED'`

// failSQL finishes failed attempts: each goes back to the queue after its
// delay, or fails for good, with its error. Rows look up their values by
// position in the arrays rather than by a join, which the planner would get
// wrong; batches are kept small for that.
var failSQL = `
UPDATE sheaf_jobs j SET
	status = ($3::text[])[array_position($1::bigint[], j.id)],
	run_at = CASE WHEN ($3::text[])[array_position($1::bigint[], j.id)] = 'QUEUED'
		THEN now() + ($4::bigint[])[array_position($1::bigint[], j.id)] * interval '1 microsecond' ELSE j.run_at END,
	completed_at = CASE WHEN ($3::text[])[array_position($1::bigint[], j.id)] = 'QUEUED' THEN NULL ELSE now() END,
	last_error = ($5::text[])[array_position($1::bigint[], j.id)],
	locked_until = NULL, locked_by = NULL, rescues = 0
WHERE j.id = ANY($1) AND ` + claimKey("j") + ` = ANY($2) AND j.status = 'PROCESSING'
RETURNING j.id`

// failedSQL is completedSQL for failSQL: the job has the claim's key, the
// status it was sent and the error it was sent.
var failedSQL = `SELECT j.id FROM sheaf_jobs j
WHERE j.id = ANY($1) AND ` + claimKey("j") + ` = ANY($2)
	AND j.status = ($3::text[])[array_position($1::bigint[], j.id)]
	AND j.last_error = ($5::text[])[array_position($1::bigint[], j.id)]`

const maxFailFlush = 200

// flush writes a batch of results. The updates only touch a job that is
// still PROCESSING in the same attempt, so a result that arrives after the
// job was rescued or cancelled changes nothing.
func (r *Runner) flush(conn *heldConn, batch []result) {
	accepted := map[int64]bool{}
	var ok, failed, parents []result
	for _, res := range batch {
		switch {
		case res.status != StatusCompleted:
			failed = append(failed, res)
		case len(r.c.reg.rulesFor(res.ex.row.Kind)) > 0:
			parents = append(parents, res)
		default:
			ok = append(ok, res)
		}
	}
	var errs []error
	for _, res := range parents {
		errs = append(errs, r.completeParent(res, accepted))
	}
	if len(ok) > 0 {
		ids, keys := make([]int64, len(ok)), make([]int64, len(ok))
		for i, res := range ok {
			ids[i], keys[i] = res.ex.row.ID, keyOf(res.ex)
		}
		errs = append(errs, r.writeResults(conn, completeSQL, completedSQL, accepted, ids, keys))
	}
	for start := 0; start < len(failed); start += maxFailFlush {
		part := failed[start:min(start+maxFailFlush, len(failed))]
		n := len(part)
		ids, keys, statuses, delays, msgs := make([]int64, n), make([]int64, n), make([]string, n), make([]int64, n), make([]string, n)
		for i, res := range part {
			ids[i], keys[i], statuses[i] = res.ex.row.ID, keyOf(res.ex), string(res.status)
			delays[i], msgs[i] = res.delay.Microseconds(), storable(res.err.Error())
		}
		errs = append(errs, r.writeResults(conn, failSQL, failedSQL, accepted, ids, keys, statuses, delays, msgs))
	}
	if err := errors.Join(errs...); err != nil {
		// The jobs stay PROCESSING; once their leases expire they are
		// rescued and run again. At least once, never lost.
		r.log.Error("queue: could not record finished jobs; they will be rescued when their leases expire",
			"jobs", len(batch), "err", err)
	}
	exs := make([]*execution, len(batch))
	for i, res := range batch {
		exs[i] = res.ex
		// A job whose statement failed has no entry: it is neither
		// completed nor rejected; the lease keeper puts it back.
		if written, known := accepted[res.ex.row.ID]; known {
			r.report(res, written)
		}
	}
	r.unhold(exs...)
}

// completeParent completes a job that is a parent in some rule, releasing
// children in the same transaction (see Rule), and marks it in accepted.
func (r *Runner) completeParent(res result, accepted map[int64]bool) error {
	rules := r.c.reg.rulesFor(res.ex.row.Kind)
	var released []releasedJob
	err := r.retry(func(ctx context.Context, try int) error {
		ok, children, err := r.completeReleasing(ctx, res, rules)
		if err == nil && !ok && try > 0 {
			// An earlier try may have committed, its answer lost.
			ok, err = r.landed(ctx, completedSQL, []any{[]int64{res.ex.row.ID}, []int64{keyOf(res.ex)}})
		}
		accepted[res.ex.row.ID], released = ok, children
		return err
	})
	if err != nil {
		delete(accepted, res.ex.row.ID)
		return err
	}
	for _, c := range released {
		ev := Event{Type: EventReleased, JobID: c.job.ID, Kind: c.job.Kind, Queue: c.job.Queue, Priority: c.job.Priority,
			ParentIDs: c.job.ParentIDs, Rule: c.rule}
		if c.job.RunID != nil {
			ev.RunID = *c.job.RunID
		}
		r.observe(ev)
		r.debug(res.ex, "queue: job released a dependent job", "rule", c.rule, "child_id", c.job.ID, "child_kind", c.job.Kind)
	}
	return nil
}

// writeResults runs a finishing statement and marks the IDs it returned in
// accepted; an ID it did not return is marked false. When a try fails, the
// statement may have committed without its answer reaching the runner; so
// after a retry, the IDs it did not return are looked up with landed, which
// finds the results already written by this claim: its own result there is
// a success, not a rejection.
func (r *Runner) writeResults(conn *heldConn, query, landedQuery string, accepted map[int64]bool, args ...any) error {
	ids := args[0].([]int64)
	err := r.retry(func(ctx context.Context, try int) (err error) {
		rows, err := conn.query(ctx, query, args...)
		if err != nil {
			return err
		}
		defer func() { conn.failed(err) }()
		if err := collectIDs(rows, accepted); err != nil || try == 0 {
			return err
		}
		rows, err = conn.query(ctx, landedQuery, args...)
		if err != nil {
			return err
		}
		return collectIDs(rows, accepted)
	})
	if err != nil {
		return err
	}
	for _, id := range ids {
		if !accepted[id] {
			accepted[id] = false
		}
	}
	return nil
}

// landed runs a completedSQL-like query and reports whether it found the job.
func (r *Runner) landed(ctx context.Context, query string, args []any) (bool, error) {
	found := map[int64]bool{}
	rows, err := r.sqlDB.QueryContext(ctx, query, args...)
	if err != nil {
		return false, err
	}
	if err := collectIDs(rows, found); err != nil {
		return false, err
	}
	return len(found) > 0, nil
}

func (r *Runner) report(res result, accepted bool) {
	ev := res.ex.event(EventCompleted)
	ev.Duration, ev.Err = res.took, res.err
	switch {
	case !accepted:
		r.stats.rejected.Add(1)
		ev.Type = EventRejected
		r.jobLogger(&res.ex.row).Warn("queue: job finished after it stopped being this runner's (rescued or cancelled); result dropped", "status", res.status)
	case res.status == StatusCompleted:
		r.stats.completed.Add(1)
		r.debug(res.ex, "queue: job completed", "duration", res.took)
	case res.status == StatusQueued:
		r.stats.retried.Add(1)
		ev.Type, ev.RetryIn = EventRetrying, res.delay
		select {
		case r.retries <- retryDue{at: time.Now().Add(res.delay), queue: res.ex.row.Queue, priority: res.ex.row.Priority}:
		default: // the fetch loop is behind; its poll finds the job
		}
		r.jobLogger(&res.ex.row).Warn("queue: job failed; will retry", "err", res.err, "retry_in", res.delay)
	default:
		r.stats.failed.Add(1)
		ev.Type = EventFailed
		r.jobLogger(&res.ex.row).Error("queue: job failed for good", "err", res.err, "permanent", IsPermanent(res.err))
	}
	r.observe(ev)
}
