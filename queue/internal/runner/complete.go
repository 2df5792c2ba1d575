package runner

// Completing: writing finished attempts, many per statement (the
// completer, a run.Batcher, calls flush).

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/payload"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// maxFlush caps the completions written by one statement: at 40,000 jobs/s
// behind a 200 ms round trip, what finishes while the last statement
// travels.
const maxFlush = 8000

// farFlushes is how many statements of results a runner has on their way
// at once behind a far server (a round trip longer than farServer): each
// carries what finished while the others travel, so the round trip is
// paid per batch rather than holding every result behind the last
// statement. Behind 200 ms, with one at a time, a runner did 0.28 of its
// nearby rate. From a nearby server, one: a statement's wait is short,
// and one batch a statement holds more results than several would.
const farFlushes = 4

// flushes is how many statements of results may be on their way at once
// (run.Batcher's Flushes).
func (r *Runner) flushes() int {
	if time.Duration(r.rttNanos.Load()) > farServer {
		return farFlushes
	}
	return 1
}

// resultConns are the connections results are written on, one per
// statement on its way. The first is held for the runner's lifetime; the
// others, behind a far server, give their connection back to the pool
// after each statement: a pool sized for the workers and Conns has no room
// to keep them, and its handlers would wait for them.
type resultConns struct {
	hold     func() store.Conn
	mu       sync.Mutex
	first    store.Conn
	inUse    bool         // first
	extra    []store.Conn // the others not in use, last given back last
	extraAll []store.Conn
}

// get returns the first connection if it is free, or another.
func (c *resultConns) get() store.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first == nil {
		c.first = c.hold()
	}
	if !c.inUse {
		c.inUse = true
		return c.first
	}
	if n := len(c.extra); n > 0 {
		conn := c.extra[n-1]
		c.extra = c.extra[:n-1]
		return conn
	}
	conn := c.hold()
	c.extraAll = append(c.extraAll, conn)
	return conn
}

// put takes back conn, which get gave.
func (c *resultConns) put(conn store.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if conn == c.first {
		c.inUse = false
		return
	}
	conn.Close() // back to the pool; it connects again when next used
	c.extra = append(c.extra, conn)
}

// Close closes the connections.
func (c *resultConns) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first != nil {
		c.first.Close()
	}
	for _, conn := range c.extraAll {
		conn.Close()
	}
}

// completeLinger is how long the completer waits for more results when it
// has fewer than batch of them and jobs are running (see run.Batcher).
var completeLinger = struct {
	wait  time.Duration
	batch int
}{time.Millisecond, 50}

// result is a finished attempt on its way to the database.
type result struct {
	ex     *Execution
	status string // COMPLETED, QUEUED (retry) or FAILED
	delay  time.Duration
	err    error
	took   time.Duration
}

// keyOf is the key of ex's claim (see store.Key).
func keyOf(ex *Execution) int64 { return store.Key(ex.row.ID, ex.row.Claims) }

// flush writes a batch of results. The updates only touch a job that is
// still PROCESSING in the same attempt, so a result that arrives after the
// job was rescued or cancelled changes nothing.
func (r *Runner) flush(conn store.Conn, batch []result) {
	// Sized for the batch at once: nearly every result of a busy runner
	// lands in both, and growing them step by step cost more than writing.
	accepted := make(map[int64]bool, len(batch))
	ok := make([]result, 0, len(batch))
	var failed []result
	type parent struct {
		res   result
		rules []Rule
	}
	var parents []parent
	for _, res := range batch {
		if res.status != statusCompleted {
			failed = append(failed, res)
		} else if rules := r.cfg.Rules.For(res.ex.row.Kind); len(rules) > 0 {
			parents = append(parents, parent{res, rules})
		} else {
			ok = append(ok, res)
		}
	}
	var errs []error
	for _, p := range parents {
		errs = append(errs, r.completeParent(p.res, p.rules, accepted))
	}
	if len(ok) > 0 {
		ids, keys := make([]int64, len(ok)), make([]int64, len(ok))
		for i, res := range ok {
			ids[i], keys[i] = res.ex.row.ID, keyOf(res.ex)
		}
		errs = append(errs, r.writeResults(accepted, ids,
			func(ctx context.Context) ([]int64, error) { return conn.Complete(ctx, ids, keys) },
			func(ctx context.Context) ([]int64, error) { return conn.CompleteLanded(ctx, ids, keys) }))
	}
	for start := 0; start < len(failed); start += store.MaxFailures {
		part := failed[start:min(start+store.MaxFailures, len(failed))]
		n := len(part)
		f := store.Failures{IDs: make([]int64, n), Keys: make([]int64, n), Statuses: make([]string, n),
			Delays: make([]time.Duration, n), Errors: make([]string, n), Runner: r.cfg.ID}
		for i, res := range part {
			f.IDs[i], f.Keys[i], f.Statuses[i] = res.ex.row.ID, keyOf(res.ex), string(res.status)
			f.Delays[i], f.Errors[i] = res.delay, payload.Storable(res.err.Error())
		}
		errs = append(errs, r.writeResults(accepted, f.IDs,
			func(ctx context.Context) ([]int64, error) { return conn.Fail(ctx, f) },
			func(ctx context.Context) ([]int64, error) { return conn.FailLanded(ctx, f) }))
	}
	if err := errors.Join(errs...); err != nil {
		// The jobs stay PROCESSING; once their leases expire they are
		// rescued and run again. At least once, never lost.
		r.log.Error("queue: could not record finished jobs; they will be rescued when their leases expire",
			"jobs", len(batch), "err", err)
	}
	exs := make([]*Execution, len(batch))
	for i, res := range batch {
		exs[i] = res.ex
		// A job whose statement failed has no entry: it is neither
		// completed nor rejected; the lease keeper puts it back.
		if written, known := accepted[res.ex.row.ID]; known {
			r.report(res, written)
		} else {
			r.unwritten.Add(1)
		}
	}
	r.unhold(exs...)
	if r.limited.Load() {
		// The slots of a limit freed here may be this runner's to fill. The
		// fetch may come before the jobs' workers count as free: then the
		// first of them to do so wakes it again (see slotFreed).
		r.slotFreed.Store(true)
		r.wakeFetch()
	}
}

// completeParent completes a job that is a parent in rules, releasing
// children in the same transaction (see Rules), and marks it in accepted.
func (r *Runner) completeParent(res result, rules []Rule, accepted map[int64]bool) error {
	var released []Released
	err := r.retry(func(ctx context.Context, try int) error {
		ok, children, err := r.completeReleasing(ctx, res.ex, rules)
		if err == nil && !ok && try > 0 {
			// An earlier try may have committed, its answer lost.
			ok, err = r.landed(ctx, res.ex)
		}
		accepted[res.ex.row.ID], released = ok, children
		return err
	})
	if err != nil {
		delete(accepted, res.ex.row.ID)
		return err
	}
	r.announceReleased(res.ex, released)
	return nil
}

// announceReleased reports the children that the completion of ex's job
// released, once that completion has committed.
func (r *Runner) announceReleased(ex *Execution, released []Released) {
	for _, c := range released {
		ev := Event{Type: EventReleased, JobID: c.ID, Kind: c.Kind, Queue: c.Queue, Priority: c.Priority,
			ParentIDs: c.ParentIDs, Rule: c.Rule}
		if c.RunID != nil {
			ev.RunID = *c.RunID
		}
		r.observe(ev)
		r.debug(ex, "queue: job released a dependent job", "rule", c.Rule, "child_id", c.ID, "child_kind", c.Kind)
	}
}

// writeResults runs write, a finishing statement, and marks the IDs it
// returned in accepted; an ID of ids it did not return is marked false.
// When a try fails, the statement may have committed without its answer
// reaching the runner; so after a retry, the IDs it did not return are
// looked up with landed, which finds the results already written by this
// claim: its own result there is a success, not a rejection.
func (r *Runner) writeResults(accepted map[int64]bool, ids []int64, write, landed func(context.Context) ([]int64, error)) error {
	err := r.retry(func(ctx context.Context, try int) error {
		written, err := write(ctx)
		if err != nil {
			return err
		}
		mark(accepted, written)
		if try == 0 {
			return nil
		}
		written, err = landed(ctx)
		mark(accepted, written)
		return err
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

func mark(m map[int64]bool, ids []int64) {
	for _, id := range ids {
		m[id] = true
	}
}

// landed reports whether the completion of ex's claim reached the
// database, its answer lost.
func (r *Runner) landed(ctx context.Context, ex *Execution) (bool, error) {
	conn := r.st.Hold(false)
	defer conn.Close()
	found, err := conn.CompleteLanded(ctx, []int64{ex.row.ID}, []int64{keyOf(ex)})
	return len(found) > 0, err
}

// event is the event of res, as the runner reports it once it is written.
func (res result) event() Event {
	ev := res.ex.event(EventCompleted)
	ev.Duration, ev.Err = res.took, res.err
	switch res.status {
	case statusQueued:
		ev.Type, ev.RetryIn = EventRetrying, res.delay
	case statusFailed:
		ev.Type = EventFailed
	}
	return ev
}

func (r *Runner) report(res result, accepted bool) {
	ev := res.event()
	switch {
	case !accepted:
		r.stats.rejected.Add(1)
		ev.Type, ev.RetryIn = EventRejected, 0
		r.jobLogger(&res.ex.row).Warn("queue: job finished after it stopped being this runner's (rescued or cancelled); result dropped", "status", res.status)
	case res.status == statusCompleted:
		r.stats.completed.Add(1)
		r.debug(res.ex, "queue: job completed", "duration", res.took)
	case res.status == statusQueued:
		r.stats.retried.Add(1)
		r.poller.Later(time.Now().Add(res.delay), retryDue{queue: res.ex.row.Queue, priority: res.ex.row.Priority})
		r.jobLogger(&res.ex.row).Warn("queue: job failed; will retry", "err", res.err, "retry_in", res.delay)
	default:
		r.stats.failed.Add(1)
		r.jobLogger(&res.ex.row).Error("queue: job failed for good", "err", res.err, "permanent", r.cfg.Errors.Permanent(res.err))
	}
	r.observe(ev)
}
