package store

import (
	"context"
	"database/sql"
	"slices"
	"time"
)

// A claim is named by its job ID and claim number, packed into one number,
// its key, so that a guard on many claims is one hashed = ANY. The claim
// number is taken modulo 2^20: two claims of one job that far apart are
// never both held. IDs stay below 2^43, eight trillion jobs.

// Key returns the key of claim number claims of job id.
func Key(id int64, claims int) int64 { return id<<20 + int64(claims)&(1<<20-1) }

// keyID returns the job ID of a claim's key.
func keyID(key int64) int64 { return key >> 20 }

// keyIDs returns the job IDs of keys.
func keyIDs(keys []int64) []int64 {
	ids := make([]int64, len(keys))
	for i, k := range keys {
		ids[i] = keyID(k)
	}
	return ids
}

// claimKey is Key in SQL, for the rows of table alias a.
func claimKey(a string) string { return "(" + a + ".id * 1048576 + " + a + ".claims % 1048576)" }

// keyIn is a condition that the claim of the row aliased a is among keys,
// a bigint[] parameter, looked up in a hash table the statement builds
// once. "= ANY(keys)" searched the whole array for each row once pgx's
// cached plan turned generic (PostgreSQL hashes only a constant array): a
// completion of n results made n² comparisons. The IN (SELECT …) is under
// an OR so that the planner keeps it a hashed subplan, rather than turning
// it into a join that, planned for a large array, read the whole table.
func keyIn(a, keys string) string {
	return "(" + claimKey(a) + " IN (SELECT unnest(" + keys + "::bigint[])) OR false)"
}

// completeSQL finishes successful attempts: the bulk of all results, so it
// carries nothing per row but the IDs and their claim keys, and the planner
// reaches the rows through the primary key. It writes no history: locked_by
// is kept, naming the runner that completed the job, and the completed
// attempt is read from the job's row.
var completeSQL = `
UPDATE sheaf_jobs j SET status = 'COMPLETED', completed_at = now(), locked_until = NULL, rescues = 0
WHERE j.id = ANY($1) AND ` + keyIn("j", "$2") + ` AND j.status = 'PROCESSING'
RETURNING j.id`

// completedSQL finds, among claims ($1, $2) whose completion was sent but
// not acknowledged, those whose completion landed: a job is COMPLETED with
// a claim's key only by that claim's completion.
var completedSQL = `SELECT j.id FROM sheaf_jobs j
WHERE j.id = ANY($1) AND ` + keyIn("j", "$2") + ` AND j.status = 'COMPLETED'`

// failSQL finishes failed attempts: each goes back to the queue after its
// delay, or fails for good, with its error. Rows look up their values by
// position in the arrays rather than by a join, which the planner would get
// wrong; batches are kept small for that (MaxFailures).
//
// Each attempt goes in the history too: retried or failed, by runner $6.
var failSQL = `
WITH f AS (
UPDATE sheaf_jobs j SET
	status = ($3::text[])[array_position($1::bigint[], j.id)],
	run_at = CASE WHEN ($3::text[])[array_position($1::bigint[], j.id)] = 'QUEUED'
		THEN now() + ($4::bigint[])[array_position($1::bigint[], j.id)] * interval '1 microsecond' ELSE j.run_at END,
	completed_at = CASE WHEN ($3::text[])[array_position($1::bigint[], j.id)] = 'QUEUED' THEN NULL ELSE now() END,
	last_error = ($5::text[])[array_position($1::bigint[], j.id)],
	locked_until = NULL, locked_by = NULL, rescues = 0
WHERE j.id = ANY($1) AND ` + keyIn("j", "$2") + ` AND j.status = 'PROCESSING'
RETURNING j.id, j.claims, j.started_at, j.status, j.last_error
), ` + recordAttempts(`SELECT id, claims, $6::text, started_at, CASE WHEN status = 'QUEUED' THEN 'retried' ELSE 'failed' END, last_error
	FROM f`) + `
SELECT id FROM f`

// failedSQL is completedSQL for failSQL: the job has the claim's key, the
// status it was sent and the error it was sent.
var failedSQL = `SELECT j.id FROM sheaf_jobs j
WHERE j.id = ANY($1) AND ` + keyIn("j", "$2") + `
	AND j.status = ($3::text[])[array_position($1::bigint[], j.id)]
	AND j.last_error = ($5::text[])[array_position($1::bigint[], j.id)]
	AND $4::bigint[] IS NOT NULL -- the delays are not compared, but the server must know their type`

// MaxFailures caps the failures one Fail writes.
const MaxFailures = 200

// Failures are failed attempts to write, by position: the job, its claim's
// key, the status it goes to (QUEUED to retry, FAILED), the delay before a
// retry, and the error; and the runner that ran them all.
type Failures struct {
	IDs, Keys []int64
	Statuses  []string
	Delays    []time.Duration
	Errors    []string
	Runner    string
}

func (f Failures) args() []any {
	us := make([]int64, len(f.Delays))
	for i, d := range f.Delays {
		us[i] = d.Microseconds()
	}
	return []any{f.IDs, f.Keys, f.Statuses, us, f.Errors}
}

// Complete marks the claims' jobs COMPLETED, each only while its claim holds
// it, and returns the IDs it completed.
func (h *held) Complete(ctx context.Context, ids, keys []int64) ([]int64, error) {
	return h.ids(ctx, completeSQL, ids, keys)
}

// CompleteLanded returns the IDs, among claims whose completion was sent but
// whose answer was lost, of those the completion reached.
func (h *held) CompleteLanded(ctx context.Context, ids, keys []int64) ([]int64, error) {
	return h.ids(ctx, completedSQL, ids, keys)
}

// Fail writes failed attempts (at most MaxFailures), each only while its
// claim holds its job, and returns the IDs it wrote.
func (h *held) Fail(ctx context.Context, f Failures) ([]int64, error) {
	return h.ids(ctx, failSQL, append(f.args(), f.Runner)...)
}

// FailLanded is CompleteLanded for Fail.
func (h *held) FailLanded(ctx context.Context, f Failures) ([]int64, error) {
	return h.ids(ctx, failedSQL, f.args()...)
}

// renewSQL renews the leases of the claims a runner holds ($3, the claim
// keys of jobs $2; lease $1 milliseconds; runner $4) and returns their keys,
// and the keys of the other jobs locked in the runner's name (orphan true):
// claims that timed out on the runner's side but ran on the server (the
// statement was still on its way when the runner gave up), and jobs whose
// results or requeues could not be written. It changes nothing but leases,
// so that it is harmless if it, too, runs on the server after the runner
// gave up on it: putBackSQL puts orphans back, by key, once the runner has
// made sure that it does not hold them.
//
// A held job whose row another transaction has locked is passed by, and
// its key returned as renewed, unrenewed: the transaction is finishing it
// (a handler's, that completes it: Job.CompleteTx; or one that cancels it),
// and may last as long as its owner likes. Waiting for it would hold up
// the renewal of every other lease the runner holds, until they expired.
// If it rolls back, the next renewal renews the lease.
var renewSQL = `
WITH free AS (
	SELECT j.id FROM sheaf_jobs j
	WHERE j.id = ANY($2) AND ` + keyIn("j", "$3") + ` AND j.status = 'PROCESSING' AND j.locked_by = $4
	FOR NO KEY UPDATE SKIP LOCKED
), renewed AS (
	UPDATE sheaf_jobs j SET locked_until = now() + $1 * interval '1 millisecond'
	FROM free WHERE j.id = free.id
	RETURNING ` + claimKey("j") + ` AS key
)
SELECT key, false FROM renewed
UNION ALL
SELECT ` + claimKey("j") + `, false FROM sheaf_jobs j
WHERE j.id = ANY($2) AND ` + keyIn("j", "$3") + ` AND j.status = 'PROCESSING' AND j.locked_by = $4
	AND NOT j.id IN (SELECT id FROM free)
UNION ALL
SELECT ` + claimKey("j") + `, true FROM sheaf_jobs j
WHERE j.locked_until IS NOT NULL AND j.locked_by = $4 AND j.status = 'PROCESSING' AND NOT ` + keyIn("j", "$3")

// Renew renews for lease the leases of runner's claims (keys, of jobs ids)
// and returns the keys it renewed, and the keys of the other jobs locked in
// the runner's name: orphans, which PutBack puts back once the runner has
// made sure it does not hold them. Renew changes nothing but leases.
func (h *held) Renew(ctx context.Context, lease time.Duration, ids, keys []int64, runner string) (renewed, orphans []int64, err error) {
	rows, err := h.query(ctx, renewSQL, lease.Milliseconds(), ids, keys, runner)
	if err != nil {
		return nil, nil, err
	}
	defer func() { h.DropOn(err) }()
	defer rows.Close()
	for rows.Next() {
		var key int64
		var orphan bool
		if err := rows.Scan(&key, &orphan); err != nil {
			return nil, nil, err
		}
		if orphan {
			orphans = append(orphans, key)
		} else {
			renewed = append(renewed, key)
		}
	}
	return renewed, orphans, rows.Err()
}

// putBackSQL puts back in the queue the claims $2 of jobs $1, locked in the
// name of runner $3, uncounting the attempt if the claim counted it (a
// suspect's counts only when it starts, and an orphan never started, or its
// handler has returned: see renewSQL). It returns the jobs it put back.
var putBackSQL = `
WITH back AS (
	UPDATE sheaf_jobs j SET status = 'QUEUED', attempts = j.attempts - CASE WHEN j.rescues = 0 THEN 1 ELSE 0 END,
		locked_until = NULL, locked_by = NULL
	WHERE j.id = ANY($1) AND ` + keyIn("j", "$2") + ` AND j.status = 'PROCESSING' AND j.locked_by = $3
	RETURNING j.id, j.kind, j.queue, j.priority, j.run_at, j.status, j.rescues
), notified AS (` + notifyDue("back") + `)
SELECT back.id, back.kind, back.queue FROM back, notified`

// JobRef names a job.
type JobRef struct {
	ID          int64
	Kind, Queue string
}

// PutBack puts orphans (see Renew) back in the queue by key, their attempt
// uncounted, and returns the jobs it put back.
func (h *held) PutBack(ctx context.Context, keys []int64, runner string) (_ []JobRef, err error) {
	ids := keyIDs(keys)
	rows, err := h.query(ctx, putBackSQL, ids, keys, runner)
	if err != nil {
		return nil, err
	}
	defer func() { h.DropOn(err) }()
	defer rows.Close()
	var out []JobRef
	for rows.Next() {
		var j JobRef
		if err := rows.Scan(&j.ID, &j.Kind, &j.Queue); err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// requeueSQL puts claims' jobs back in the queue, each only while that
// claim holds it, keeping its run time (and so its place in the queue), and
// returns the IDs it put back. The attempt is uncounted if it was counted
// ($3: at the claim, or for a suspect when it started). free is the rows
// it may take: all of them, waiting for any that another transaction
// holds, or (requeueFreeSQL) only those no transaction holds.
func requeueSQL(free string) string {
	return `
WITH d AS (SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::int[]) AS d(id, key, counted)),
free AS (SELECT j.id FROM sheaf_jobs j WHERE j.id = ANY($1) AND j.status = 'PROCESSING' ` + free + `),
req AS (
	UPDATE sheaf_jobs j SET status = 'QUEUED', attempts = j.attempts - d.counted, locked_until = NULL, locked_by = NULL
	FROM d, free WHERE j.id = free.id AND j.id = d.id AND ` + claimKey("j") + ` = d.key AND j.status = 'PROCESSING'
	RETURNING j.id, j.queue, j.priority, j.run_at, j.status, j.rescues
), notified AS (` + notifyDue("req") + `)
SELECT req.id FROM req, notified`
}

var (
	requeueFreeSQL = requeueSQL("FOR NO KEY UPDATE SKIP LOCKED")
	requeueAllSQL  = requeueSQL("")
)

// Requeue puts the claims' jobs back in the queue, uncounting the attempts
// marked counted, and returns the IDs it put back. It puts back at once
// the jobs whose rows no other transaction holds, and only then waits for
// the others (a handler's transaction that completes its job: see renewSQL;
// or one that cancels it), until ctx ends: one held row does not keep the
// others PROCESSING. On an error it returns the IDs put back before it.
func (s *postgres) Requeue(ctx context.Context, ids, keys []int64, counted []bool) ([]int64, error) {
	n := make([]int32, len(counted))
	for i, c := range counted {
		if c {
			n[i] = 1
		}
	}
	rows, err := s.db.QueryContext(ctx, requeueFreeSQL, ids, keys, n)
	if err != nil {
		return nil, err
	}
	put, err := scanIDs(rows)
	if err != nil || len(put) == len(ids) {
		return put, err
	}
	// The rest were held, or are no longer the claims' (completed,
	// cancelled, rescued): wait for the held ones.
	var rest []int64
	var restKeys []int64
	var restN []int32
	for i, id := range ids {
		if !slices.Contains(put, id) {
			rest, restKeys, restN = append(rest, id), append(restKeys, keys[i]), append(restN, n[i])
		}
	}
	rows, err = s.db.QueryContext(ctx, requeueAllSQL, rest, restKeys, restN)
	if err != nil {
		return put, err
	}
	more, err := scanIDs(rows)
	return append(put, more...), err
}

// rescueSQL takes jobs whose lease expired back from their runner ($1 is
// the rescuing runner): see Rescue.
var rescueSQL = `
WITH expired AS (
	SELECT id, locked_by FROM sheaf_jobs
	WHERE status = 'PROCESSING' AND locked_until < now()
	ORDER BY locked_until
	LIMIT 1000
	FOR UPDATE SKIP LOCKED
), rescued AS (
	UPDATE sheaf_jobs j SET
		attempts = CASE WHEN j.rescues = 0 THEN j.attempts - 1 ELSE j.attempts END,
		status = CASE WHEN j.rescues > 0 AND j.attempts >= j.max_attempts THEN 'FAILED' ELSE 'QUEUED' END,
		completed_at = CASE WHEN j.rescues > 0 AND j.attempts >= j.max_attempts THEN now() END,
		rescues = j.rescues + 1,
		run_at = now(),
		last_error = 'lease expired: runner ' || coalesce(j.locked_by, '?') ||
			' did not renew it in time (it stopped, froze, or lost the database); rescued by runner ' || $1,
		locked_until = NULL, locked_by = NULL
	FROM expired WHERE j.id = expired.id
	RETURNING j.id, j.kind, j.queue, j.status, j.attempts, j.max_attempts, j.correlation_id, j.priority, j.run_at,
		j.last_error, j.rescues, expired.locked_by AS lost_by, j.claims, j.started_at
), ` + recordAttempts(`SELECT id, claims, lost_by, started_at, 'rescued', last_error FROM rescued`) + `,
notified AS (` + notifyDue("rescued") + `)
SELECT rescued.id, rescued.kind, rescued.queue, rescued.status, rescued.attempts, rescued.max_attempts, rescued.correlation_id,
	rescued.last_error, rescued.rescues, rescued.lost_by
FROM rescued, notified`

// Rescued is a job taken back from a runner whose lease on it expired.
type Rescued struct {
	JobRef
	Status                string // QUEUED, or FAILED if it has used its attempts
	Attempts, MaxAttempts int
	CorrelationID         *string
	LastError             *string
	Rescues               int
	LostBy                string // the runner whose lease expired
}

// Rescue takes back up to 1000 jobs whose lease expired, for runner. A job
// rescued for the first time since an attempt of it last finished goes back
// to the queue with that attempt uncounted, a suspect; a suspect rescued
// again has used its attempt, and fails once it has used them all. SKIP
// LOCKED keeps two rescuers from fighting.
func (s *postgres) Rescue(ctx context.Context, runner string) (_ []Rescued, err error) {
	rows, err := s.db.QueryContext(ctx, rescueSQL, runner)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Rescued
	for rows.Next() {
		var j Rescued
		var lostBy sql.NullString
		if err := rows.Scan(&j.ID, &j.Kind, &j.Queue, &j.Status, &j.Attempts, &j.MaxAttempts, &j.CorrelationID,
			&j.LastError, &j.Rescues, &lostBy); err != nil {
			return out, err // the rows before it were rescued all the same
		}
		j.LostBy = lostBy.String
		out = append(out, j)
	}
	return out, rows.Err()
}
