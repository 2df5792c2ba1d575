package runner

// Claiming: the fetch loop, the claim statements and the claim cursor.

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// claimCooldown is how long the fetch loop may wait for more slots to free
// up before claiming for only some of them, while more jobs are likely
// waiting. Each claim costs a statement and a commit; claiming for every
// slot at once spreads that over many jobs, and short jobs free their slots
// within this time anyway. Long jobs lose at most this much per claim.
const claimCooldown = 2 * time.Millisecond

func (r *Runner) wakeFetch() { r.poller.Wake() }

// retryDue is a retried job's queue and priority, for the claims to look
// above their cursor for it when it falls due (see run.Poller.Later).
type retryDue struct {
	queue    string
	priority int
}

// fetcher claims jobs for the runner's free slots on a connection of its
// own. Its fetch is the run.Poller's Fetch: only the poller's goroutine
// calls it.
type fetcher struct {
	r         *Runner
	conn      store.Conn
	jobsCtx   context.Context // the jobs' parent context: done once Start's is
	turn      int             // which queue goes first, so one busy queue does not starve the others
	lastClaim time.Time
	cursors   map[string]*cursor
	paused    map[string]bool // paused queues, as read at pausedAt (see readPaused)
	pausedAt  time.Time
	limits    limitsSeen // see noteLimits
	rtts      roundTrips // see readPaused
}

// fetch claims until the slots are full or the queues have nothing due,
// then puts back what waited too long for a worker. It returns how soon to
// come back when that is before the next poll: it held back (see
// claimCooldown), or a job claimed ahead will have waited too long.
func (f *fetcher) fetch(ctx context.Context) time.Duration {
	// A pause or resume notified (or, at the start, any pause) is read
	// before claiming. The periodic read, a fallback for a notification
	// the listener missed, comes after the claims, so that it never
	// stands between a new job's notification and its claim.
	notified := f.r.pausedStale.Swap(false) || f.pausedAt.IsZero()
	if notified {
		f.readPaused(ctx)
	}
	wait := f.claimAll(ctx, f.jobsCtx)
	if !notified && time.Since(f.pausedAt) >= f.r.cfg.Poll {
		f.readPaused(ctx)
	}
	if next := f.r.releaseWaiting(); next > 0 && (wait == 0 || next < wait) {
		wait = next
	}
	return wait
}

// readPaused reads the paused queues, and with them, in the same
// statement, the limits in force (see noteLimits): so a limit set on
// another process applies within a poll interval, and limits cost no round
// trip of their own. fetch calls it when a pause or resume was notified
// (Runner.pausedStale), and once a poll interval otherwise, whether or not
// the poll's timer fires: on a busy runner, fetches come sooner. When it
// cannot, it keeps what it knew and reads again at the next fetch.
func (f *fetcher) readPaused(ctx context.Context) {
	r := f.r
	f.pausedAt = time.Now()
	ctx, cancel := context.WithTimeout(ctx, r.timeouts.statement)
	defer cancel()
	names, limits, err := f.conn.Holds(ctx)
	if err == nil {
		// A statement that reads a row or two: its time is the round trip.
		again := func() (time.Duration, error) {
			began := time.Now()
			_, _, err := f.conn.Holds(ctx)
			return time.Since(began), err
		}
		r.rttNanos.Store(int64(f.rtts.confirmed(time.Since(f.pausedAt), again)))
	} else {
		r.pausedStale.Store(true)
		if ctx.Err() == nil {
			r.log.Error("queue: could not read the paused queues and the limits", "err", err)
		}
		return
	}
	paused := map[string]bool{}
	for _, q := range names {
		if slices.Contains(r.cfg.Queues, q) {
			paused[q] = true
		}
	}
	f.paused = paused
	f.noteLimits(limits)
}

// claimAll claims until the slots are full or the queues have nothing due.
// It returns how soon to try again when it held back, or 0.
func (f *fetcher) claimAll(ctx, jobsCtx context.Context) time.Duration {
	r := f.r
	for ctx.Err() == nil {
		if jobsCtx.Err() != nil {
			return 0 // Start's context is done: claimed jobs could not run
		}
		free := r.freeSlots()
		if free == 0 {
			return 0 // a finishing job wakes the loop
		}
		// Slots a tight limit's completions freed are claimed at once:
		// the cooldown waits for more of the runner's own to free up,
		// which under a binding limit only leaves the freed ones idle.
		freed := r.slotFreed.Swap(false) && r.tight.Load()
		if r.more.Load() && free < r.capacity() && !freed {
			if since := time.Since(f.lastClaim); since < claimCooldown {
				return claimCooldown - since
			}
		}
		got := 0
		// Behind a slow claim, ask too for the slots that will free up
		// while it is on its way (see pipelined).
		extra := r.pipelined()
		closedQueues, closedKinds := r.cfg.Kinds.Closed(r.cfg.Clock.Now(), r.cfg.Queues)
		for q := range f.paused {
			closedQueues[q] = true
		}
		if r.suspects.Load() {
			if err := f.claimSuspect(ctx, jobsCtx, closedQueues, closedKinds); err != nil {
				if ctx.Err() == nil {
					r.log.Error("queue: claim failed", "err", err)
				}
				return 0
			}
		}
		for i := range r.cfg.Queues {
			q := r.cfg.Queues[(f.turn+i)%len(r.cfg.Queues)]
			slots := r.freeSlots()
			n := slots + extra
			if n == 0 {
				break
			}
			if closedQueues[q] {
				continue // outside its window; the poll comes back for it
			}
			cur := f.cursors[q]
			if cur != nil && time.Now().After(cur.until) {
				cur = nil // rescan from the start now and then; see claimFromSQL
			}
			higher := cur != nil && r.notifiedAbove(q, cur.priority)
			began := time.Now()
			rows, err := f.claim(ctx, jobsCtx, q, n, cur, higher, closedKinds)
			average(&r.claimNanos, time.Since(began))
			if err != nil {
				if ctx.Err() == nil {
					r.log.Error("queue: claim failed", "queue", q, "err", err)
				}
				return 0
			}
			got += len(rows)
			extra = max(extra-max(len(rows)-slots, 0), 0)
			switch {
			case len(rows) < n:
				delete(f.cursors, q) // reached the end: next time from the start
			case cur == nil:
				last := rows[len(rows)-1]
				f.cursors[q] = &cursor{priority: last.Priority, runAt: last.RunAt, id: last.ID, until: time.Now().Add(r.cfg.Poll)}
			default:
				last := rows[len(rows)-1]
				cur.priority, cur.runAt, cur.id = last.Priority, last.RunAt, last.ID
			}
		}
		f.turn++
		f.lastClaim = time.Now()
		// Slots freed while the claims ran are asked for too, so got may
		// exceed free: more jobs are likely waiting unless the claims came
		// back short. (got == free here left a runner idle until its next
		// poll when the last claim took more than free.)
		r.more.Store(got >= free)
		if got < free {
			return 0
		}
	}
	return 0
}

func (r *Runner) freeSlots() int {
	c := r.capacity()
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(c-len(r.running), 0)
}

// capacity is how many jobs the runner holds at once: one per worker, plus,
// claimed ahead, as many as the workers will likely finish while the next
// claim is on its way (see ahead), so that they do not sit idle waiting
// for it. A runner with one worker claims nothing ahead: that is how a
// serial queue is worked, one job held at a time.
func (r *Runner) capacity() int { return r.cfg.Workers + r.ahead() }

// ahead is how many jobs the workers will likely finish while a claim is
// on its way: workers × claim time ÷ job time, at most as many again as
// there are workers. So jobs no longer than a claim move in claims twice
// the size, each costing the database about the same, and no more: a job
// claimed ahead waits for a worker where another runner might have
// started it at once; jobs much longer than a claim get next to nothing
// ahead. Behind a far server (a round trip longer than farServer, see
// Runner.rttNanos) it is what the workers finish in a round trip, jobs
// shorter than minJob counted as minJob, up to maxAhead per worker: then
// each claim brings what the workers do while it travels, and the round
// trip is paid per claim, not per job. The round trip is measured apart
// from the claims, whose time also grows with their size and the server's
// load: sized by the claims' time, claims grew larger the slower a loaded
// server took them, and slower the larger they grew.
func (r *Runner) ahead() int {
	w := int64(r.cfg.Workers)
	job, claim := r.jobNanos.Load(), r.claimNanos.Load()
	if job <= 0 || claim <= 0 || w < 2 {
		return 0 // nothing measured yet, or serial
	}
	n := w * claim / max(job, claim)
	if rtt := r.rttNanos.Load(); rtt > int64(farServer) {
		n = max(n, min(w*rtt/max(job, int64(minJob)), w*maxAhead))
	}
	return int(n)
}

// farServer is the round trip from which the server counts as far away
// (see ahead): on one machine or one network a round trip takes well under
// a millisecond, and a few on a loaded one.
const farServer = 10 * time.Millisecond

// minJob is the least a job counts for when the claim-ahead is sized for a
// far server: it bounds the rate the claims are sized for at workers ÷
// minJob, 200,000 jobs/s for the default 100 workers, well above what one
// runner does from a nearby server (45,000 to 70,000 no-op jobs/s on two
// cores), since a claim's own time grows with its size: sized for 100,000,
// a runner 200 ms away did 0.46 to 0.60 of its nearby rate, and 0.56 to
// 0.66 sized for this.
const minJob = 500 * time.Microsecond

// maxAhead bounds the claim-ahead at this many jobs per worker: enough for
// a round trip of 200 ms at the rate minJob sizes for.
const maxAhead = 400

// pipelined is how many more jobs than there are free slots a claim asks
// for: none from a nearby server; behind a far one, the jobs the workers
// will have finished by the time it lands (see ahead) of those the runner
// holds, so that each claim brings what the workers do in a round trip,
// rather than what they did in the few milliseconds since the last one
// landed.
func (r *Runner) pipelined() int {
	if time.Duration(r.rttNanos.Load()) <= farServer {
		return 0
	}
	return min(r.ahead(), r.runningNow())
}

// claimAheadWait is how long a job claimed ahead may wait for a worker,
// beyond twice a claim's time (see aheadWait), before it goes back to the
// queue, for a runner with a free worker to take: the jobs have got slower
// than the claim-ahead was sized for.
const claimAheadWait = 100 * time.Millisecond

// aheadWait is how long a job claimed ahead may wait for a worker: behind
// a slow claim, the claim-ahead is sized for a claim's time (see ahead),
// and its last job waits about that long when the estimate holds.
func (r *Runner) aheadWait() time.Duration {
	return claimAheadWait + 2*time.Duration(r.claimNanos.Load())
}

// releaseWaiting puts back in the queue, without counting their attempt,
// the jobs claimed ahead that have waited longer than aheadWait for a
// worker, and returns how soon the next waiting one is due (0: none waits).
func (r *Runner) releaseWaiting() time.Duration {
	now := time.Now()
	var next time.Duration
	oldest, ok := r.pool.Oldest()
	if !ok {
		return 0
	}
	wait := r.aheadWait()
	if left := wait - now.Sub(oldest.claimed); left > 0 {
		return left // the oldest is not due yet, so none is: the common case
	}
	exs := r.unwait(func(ex *Execution) bool {
		left := wait - now.Sub(ex.claimed)
		if left > 0 && (next == 0 || left < next) {
			next = left
		}
		return left <= 0
	})
	if len(exs) > 0 {
		// The jobs are slower than the estimate says: no claim-ahead until
		// those that finish say otherwise.
		w, claim := int64(r.cfg.Workers), r.claimNanos.Load()
		r.jobNanos.Store(max(r.jobNanos.Load(), w*claim+1))
		for _, ex := range exs {
			ex.cancel(nil) // it will never run; free its context
		}
		_, _ = r.requeue(exs, time.Time{}, "claimed ahead, and waited too long for a worker") // logged; the lease keeper puts back what it could not
	}
	return next
}

// average moves a moving average a step towards sample. Concurrent steps
// may lose one another; an estimate does not mind.
func average(avg *atomic.Int64, sample time.Duration) {
	old := avg.Load()
	if old == 0 {
		avg.Store(int64(sample))
		return
	}
	avg.Store(old + (int64(sample)-old)/8)
}

// roundTrips keeps the last few round trips measured, and gives their
// least as the round trip. A read's time is the round trip plus whatever
// delayed it once: a connection dialled anew after a server restart, a
// checkpoint, a loaded machine. An average of such samples made a server
// on the same machine look far away for dozens of reads after a restart,
// and the runner claimed thousands of jobs ahead (see Runner.ahead). The
// least of the recent ones ignores a delay unless it lasts for all of
// them, as a far server's does.
type roundTrips struct {
	last [8]time.Duration
	n    int // samples taken, of which the last len(last) are kept
}

// add records a sample and returns the least of those kept.
func (t *roundTrips) add(d time.Duration) time.Duration {
	t.last[t.n%len(t.last)] = d
	t.n++
	least := d
	for _, s := range t.last[:min(t.n, len(t.last))] {
		least = min(least, s)
	}
	return least
}

// sureRoundTrips is how many reads the runner takes before it believes
// one that says the server is far (see roundTrips.confirmed).
const sureRoundTrips = 3

// confirmed records read, a read's time, and returns the round trip, as
// add does; but until sureRoundTrips reads are kept, a round trip that
// says the server is far is checked at once with another read (again). A
// far server makes the runner claim far ahead (see Runner.ahead), and one
// read can look far on its own: a backend's first, which also loads the
// catalogs of the tables it reads, or any on a loaded machine (19 to 36
// ms seen on two cores running two test packages, where most reads took
// well under a millisecond); a runner that believed its first read held
// hundreds more jobs than its workers for its first seconds. A far server
// costs the extra reads once, as the runner starts.
func (t *roundTrips) confirmed(read time.Duration, again func() (time.Duration, error)) time.Duration {
	rtt := t.add(read)
	for rtt > farServer && t.n < sureRoundTrips {
		d, err := again()
		if err != nil {
			break
		}
		rtt = t.add(d)
	}
	return rtt
}

// cursor is where a runner's last claim on a queue stopped, in claim order.
type cursor struct {
	priority int
	runAt    time.Time
	id       int64
	until    time.Time // rescan from the start after this
}

// claim locks up to n due jobs of queue for this runner, counting their
// attempt now, so that a job that crashes its runner still runs out of
// attempts, and launches them. With a cursor it continues from it (see
// store.Claim).
func (f *fetcher) claim(ctx, jobsCtx context.Context, queue string, n int, cur *cursor, higher bool, closedKinds []string) ([]Row, error) {
	r := f.r
	c := store.Claim{Queue: queue, N: n, Lease: r.cfg.Lease, Runner: r.cfg.ID, ClosedKinds: closedKinds, Higher: higher,
		Limited: f.limitedQueue(queue), Fair: f.limits.fair}
	if cur != nil {
		c.From = &store.Cursor{Priority: cur.priority, RunAt: cur.runAt, ID: cur.id}
	}
	out, err := f.claimAndLaunch(ctx, jobsCtx, c.Fair, func(ctx context.Context) ([]store.Claimed, error) { return f.conn.Claim(ctx, c) })
	if err != nil {
		return nil, err
	}
	r.stats.claimed.Add(int64(len(out)))
	return out, nil
}

// claimSuspect claims a suspect, if this runner runs none and has a worker
// free for it, and launches it. It forgets that suspects may wait when it
// finds none.
func (f *fetcher) claimSuspect(ctx, jobsCtx context.Context, closedQueues map[string]bool, closedKinds []string) error {
	r := f.r
	r.mu.Lock()
	busy := r.suspect != nil || len(r.running) >= r.cfg.Workers
	r.mu.Unlock()
	if busy {
		return nil
	}
	var open []string
	for _, q := range r.cfg.Queues {
		if !closedQueues[q] {
			open = append(open, q)
		}
	}
	r.suspects.Store(false) // before looking, so a notification meanwhile is not lost
	out, err := f.claimAndLaunch(ctx, jobsCtx, false, func(ctx context.Context) ([]store.Claimed, error) {
		if f.limitedQueues(open) {
			return f.conn.ClaimSuspectLimited(ctx, open, store.Claim{Lease: r.cfg.Lease, Runner: r.cfg.ID, ClosedKinds: closedKinds})
		}
		return f.conn.ClaimSuspect(ctx, open, r.cfg.Lease, r.cfg.ID, closedKinds)
	})
	if err != nil {
		r.suspects.Store(true)
		return err
	}
	if len(out) > 0 {
		r.stats.claimed.Add(1)
		r.jobLogger(&out[0]).Info("queue: running a rescued job on its own", "rescues", out[0].Rescues)
	}
	return nil
}

// claimAndLaunch runs a claim statement and hands the jobs it claimed to
// the workers, holding r.claiming throughout (see Runner.claiming). The
// claim is not cancelled by Stop, only bounded: a claim cancelled after the
// server committed it would leave its jobs PROCESSING with nobody running
// them. If it fails anyway (it timed out, or the connection broke), the
// server may still run it: the lease keeper is asked to look for jobs held
// in this runner's name that it does not run, and to put them back.
func (f *fetcher) claimAndLaunch(ctx, jobsCtx context.Context, fair bool, claim func(context.Context) ([]store.Claimed, error)) (out []Row,
	err error) {
	r := f.r
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeouts.statement)
	defer cancel()
	r.claiming.Lock()
	defer r.claiming.Unlock()
	defer func() {
		if err != nil { // the store has dropped the connection
			r.renewer.Poke()
		}
	}()
	claimed, err := claim(ctx)
	if err != nil {
		return nil, err
	}
	out = make([]Row, len(claimed))
	var meta metadataCache
	for i := range claimed {
		r.claimedRecord(&out[i], &claimed[i], &meta)
	}
	if fair {
		// In the turns the claim took among keys, as the store returns
		// them: by claim order, an older key's jobs would all start before
		// a newer key's of the same claim, and the newer key, its jobs
		// longer in the runner, would run fewer than its share.
		r.launch(jobsCtx, out)
	}
	// In claim order: priority, run time, ID. Workers start them in this
	// order (unless fair), and the last one is the cursor.
	slices.SortFunc(out, func(a, b Row) int {
		if a.Priority != b.Priority {
			return b.Priority - a.Priority
		}
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
	if !fair {
		r.launch(jobsCtx, out)
	}
	return out, nil
}

// claimedRecord fills j, the Row of claimed job c, in place: a Row built
// here and returned would escape to the heap through json.Unmarshal's
// pointer into it, one more copy of every job.
func (r *Runner) claimedRecord(j *Row, c *store.Claimed, meta *metadataCache) {
	*j = Row{ID: c.ID, Kind: c.Kind, Queue: c.Queue, Status: statusProcessing, Priority: c.Priority, Payload: c.Payload,
		CorrelationID: c.CorrelationID, Attempts: c.Attempts, Claims: c.Claims, Rescues: c.Rescues, MaxAttempts: c.MaxAttempts,
		CreatedAt: c.CreatedAt, StartedAt: c.StartedAt, RunAt: c.RunAt, RunID: c.RunID, Period: c.Period, ParentIDs: c.ParentIDs,
		Total: c.Total}
	if len(c.Auth) > 0 {
		if err := json.Unmarshal(c.Auth, &j.Auth); err != nil {
			r.log.Warn("queue: job has an auth context that does not decode", "job_id", j.ID, "err", err)
		}
	}
	if len(c.Backoff) > 0 {
		j.backoffJSON = c.Backoff
	}
	if len(c.Metadata) > 0 {
		j.Metadata = meta.decode(r, j.ID, c.Metadata)
	}
}

// metadataCache decodes the metadata of a claim's jobs, once for a run of
// jobs that have the same, as the jobs of one enqueue call do: they share
// the map, which the hooks only read.
type metadataCache struct {
	raw []byte
	m   map[string]string
}

func (mc *metadataCache) decode(r *Runner, id int64, raw []byte) map[string]string {
	if mc.m != nil && bytes.Equal(mc.raw, raw) {
		return mc.m
	}
	m, err := store.DecodeMetadata(raw)
	if err != nil {
		r.log.Warn("queue: job has metadata that does not decode", "job_id", id, "err", err)
		return nil
	}
	mc.raw, mc.m = raw, m
	return m
}

// parseNotice reads a new-jobs notification, schema removed: "queue:priority",
// the highest priority among the jobs that became due, or "queue:s" when
// suspects did. A payload without a priority counts as the highest.
func parseNotice(payload string) (queue string, priority int, suspects bool) {
	i := strings.LastIndexByte(payload, ':')
	if i < 0 {
		return payload, maxPriority, false
	}
	if payload[i+1:] == "s" {
		return payload[:i], 0, true
	}
	p, err := strconv.Atoi(payload[i+1:])
	if err != nil {
		return payload, maxPriority, false
	}
	return payload[:i], p, false
}

func (r *Runner) noteArrival(queue string, priority int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.arrivals[queue] = max(r.arrivals[queue], priority)
}

// notifiedAbove reports, and forgets, whether a job of higher priority than
// p was notified on queue since the last claim.
func (r *Runner) notifiedAbove(queue string, p int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	above := r.arrivals[queue] > p
	delete(r.arrivals, queue)
	return above
}
