package store

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strconv"
	"strings"
	"time"
)

var claimSQL = `
WITH c AS (
	SELECT id FROM sheaf_jobs
	WHERE status = 'QUEUED' AND rescues = 0 AND queue = $1 AND run_at <= now() AND NOT kind = ANY($5)
	ORDER BY priority DESC, run_at, id
	LIMIT $2
	FOR UPDATE SKIP LOCKED
)
UPDATE sheaf_jobs j SET ` + claimSet + `
FROM c WHERE j.id = c.id
RETURNING ` + claimColumns

// claimSet is how a claim marks a job: PROCESSING under the runner's lease
// ($3 milliseconds, runner $4), with a new claim number and the attempt
// counted.
const claimSet = `status = 'PROCESSING', attempts = j.attempts + 1, claims = j.claims + 1, started_at = now(),
	locked_until = now() + $3 * interval '1 millisecond', locked_by = $4, output = NULL`

const claimColumns = `j.id, j.kind, j.queue, j.priority, j.payload, j.correlation_id, j.attempts, j.claims, j.rescues,
	j.max_attempts, j.backoff, j.created_at, j.started_at, j.auth, j.run_at, j.run_id, j.period, j.parent_ids, j.total,
	coalesce(j.meta, convert_to(j.metadata::text, 'UTF8'))` // metadata: jobs enqueued before schema version 7

// claimFromSQL claims like claimSQL, but continues from a cursor (the last
// position claimed) instead of scanning the claim index from its start. On a
// busy queue the start of the index is a long run of entries for jobs
// claimed since the table was last vacuumed; every claim from the start
// steps over all of them, which costs milliseconds per claim on a backlog of
// a hundred thousand jobs. The branches are CTEs, which PostgreSQL reads
// only as far as the LIMIT needs: higher priorities (only when a
// notification said one arrived, $5), then the cursor's priority onward,
// then lower priorities.
var claimFromSQL = `
WITH higher AS (
	SELECT id FROM sheaf_jobs
	WHERE $5 AND status = 'QUEUED' AND rescues = 0 AND queue = $1 AND run_at <= now() AND priority > $6 AND NOT kind = ANY($9)
	ORDER BY priority DESC, run_at, id LIMIT $2 FOR UPDATE SKIP LOCKED
), onward AS (
	SELECT id FROM sheaf_jobs
	WHERE status = 'QUEUED' AND rescues = 0 AND queue = $1 AND run_at <= now() AND priority = $6 AND (run_at, id) > ($7, $8)
		AND NOT kind = ANY($9)
	ORDER BY priority DESC, run_at, id LIMIT $2 FOR UPDATE SKIP LOCKED
), lower AS (
	SELECT id FROM sheaf_jobs
	WHERE status = 'QUEUED' AND rescues = 0 AND queue = $1 AND run_at <= now() AND priority < $6 AND NOT kind = ANY($9)
	ORDER BY priority DESC, run_at, id LIMIT $2 FOR UPDATE SKIP LOCKED
), c AS (
	SELECT id FROM higher UNION ALL SELECT id FROM onward UNION ALL SELECT id FROM lower LIMIT $2
)
UPDATE sheaf_jobs j SET ` + claimSet + `
FROM c WHERE j.id = c.id
RETURNING ` + claimColumns

// claimSuspectSQL claims the first suspect due in the queues $1 (see
// JobRecord.Rescues). Its attempt is counted when it starts, not here.
var claimSuspectSQL = `
WITH c AS (
	SELECT id FROM sheaf_jobs
	WHERE status = 'QUEUED' AND rescues > 0 AND queue = ANY($1) AND run_at <= now() AND NOT kind = ANY($5)
	ORDER BY priority DESC, run_at, id
	LIMIT $2
	FOR UPDATE SKIP LOCKED
)
UPDATE sheaf_jobs j SET status = 'PROCESSING', claims = j.claims + 1, started_at = NULL,
	locked_until = now() + $3 * interval '1 millisecond', locked_by = $4, output = NULL
FROM c WHERE j.id = c.id
RETURNING ` + claimColumns

// startSuspectSQL counts a suspect's attempt as it starts, durably, before
// its handler runs: if the process dies from here on, the attempt counts.
// The claim left started_at empty, so that a try after one whose answer was
// lost does not count the attempt twice.
const startSuspectSQL = `UPDATE sheaf_jobs SET attempts = attempts + CASE WHEN started_at IS NULL THEN 1 ELSE 0 END,
	started_at = coalesce(started_at, now())
WHERE id = $1 AND ` + attemptGuard + ` RETURNING attempts, started_at`

// attemptGuard matches a job only while the claim $2 holds it.
const attemptGuard = `claims = $2 AND status = 'PROCESSING'`

// Claimed is a job as a claim returns it: PROCESSING under the claiming
// runner's lease.
type Claimed struct {
	ID                        int64
	Kind, Queue               string
	Priority                  int
	Payload, Backoff, Auth    []byte // JSON; Backoff and Auth may be empty
	Metadata                  []byte // as EncodeMetadata writes it; empty for a job without; jobs with the same share it
	CorrelationID             *string
	Attempts, Claims, Rescues int
	MaxAttempts               int
	CreatedAt, RunAt          time.Time
	StartedAt                 *time.Time
	RunID, Period             *string
	ParentIDs                 []int64
	Total                     *int64
}

// Cursor is where a runner's last claim on a queue stopped, in claim order
// (priority descending, run time, ID).
type Cursor struct {
	Priority int
	RunAt    time.Time
	ID       int64
}

// Claim asks for up to N due jobs of Queue, of no kind in ClosedKinds, for
// Runner under a lease of Lease. From continues from a cursor instead of the
// start of the queue (see claimFromSQL), looking above it first when Higher.
type Claim struct {
	Queue       string
	N           int
	Lease       time.Duration
	Runner      string
	ClosedKinds []string
	From        *Cursor
	Higher      bool
	// Limited claims within the limits in force (limits.go): a runner
	// sets it when a limit may apply to Queue. SQLite's ignores From.
	Limited bool
	// Fair, with Limited, takes turns among the keys of the kinds with a
	// fair limit (limits.go); it ignores From.
	Fair bool
}

// Claim locks up to c.N due jobs for c.Runner, counting their attempt, and
// returns them (in no particular order).
func (h *held) Claim(ctx context.Context, c Claim) ([]Claimed, error) {
	if c.Limited {
		return h.claimLimited(ctx, c, false, []string{c.Queue})
	}
	closed := c.ClosedKinds
	if closed == nil {
		closed = []string{}
	}
	if c.From == nil {
		return h.claimed(ctx, c.N, claimSQL, c.Queue, c.N, c.Lease.Milliseconds(), c.Runner, closed)
	}
	return h.claimed(ctx, c.N, claimFromSQL, c.Queue, c.N, c.Lease.Milliseconds(), c.Runner,
		c.Higher, c.From.Priority, c.From.RunAt, c.From.ID, closed)
}

// ClaimSuspect claims the first due suspect of queues, of no kind in
// closedKinds, for runner; its attempt is counted when it starts
// (StartSuspect). It returns no job when none is due.
func (h *held) ClaimSuspect(ctx context.Context, queues []string, lease time.Duration, runner string, closedKinds []string) ([]Claimed, error) {
	if closedKinds == nil {
		closedKinds = []string{}
	}
	return h.claimed(ctx, 1, claimSuspectSQL, queues, 1, lease.Milliseconds(), runner, closedKinds)
}

// claimed runs a claim statement that claims at most n jobs. The jobs'
// slice is made for n at once: a Claimed is a few hundred bytes, and
// growing the slice by appending copied and cleared each claim's jobs
// several times over.
func (h *held) claimed(ctx context.Context, n int, query string, args ...any) (_ []Claimed, err error) {
	rows, err := h.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer func() { h.DropOn(err) }()
	return scanClaimed(rows, n)
}

// scanClaimed reads the jobs a claim statement returns, at most n, and
// closes rows.
func scanClaimed(rows *sql.Rows, n int) ([]Claimed, error) {
	defer rows.Close()
	out := make([]Claimed, 0, n)
	var meta sql.RawBytes
	for rows.Next() {
		// Scanned in place: a Claimed of its own would escape to the heap,
		// one allocation per job, through Scan's pointers.
		out = append(out, Claimed{})
		j := &out[len(out)-1]
		if err := rows.Scan(&j.ID, &j.Kind, &j.Queue, &j.Priority, &j.Payload, &j.CorrelationID, &j.Attempts, &j.Claims, &j.Rescues,
			&j.MaxAttempts, &j.Backoff, &j.CreatedAt, &j.StartedAt, &j.Auth, &j.RunAt, &j.RunID, &j.Period, (*idList)(&j.ParentIDs), &j.Total,
			&meta); err != nil {
			return nil, err
		}
		j.Metadata = sharedBytes(out[:len(out)-1], meta)
	}
	return out, rows.Err()
}

// ClaimSuspectLimited is ClaimSuspect within the limits in force.
func (h *held) ClaimSuspectLimited(ctx context.Context, queues []string, c Claim) ([]Claimed, error) {
	c.N = 1
	return h.claimLimited(ctx, c, true, queues)
}

// StartSuspect counts the attempt of claim claims of suspect id as it
// starts, durably, and returns the attempts and the start time. It returns
// sql.ErrNoRows if the claim no longer holds the job.
func (s *postgres) StartSuspect(ctx context.Context, id int64, claims int) (attempts int, started time.Time, err error) {
	err = s.db.QueryRowContext(ctx, startSuspectSQL, id, claims).Scan(&attempts, &started)
	return attempts, started, err
}

// idList scans a bigint[] in PostgreSQL's text form.
type idList []int64

func (l *idList) Scan(src any) error {
	ids, err := ParseIDList(src)
	*l = ids
	return err
}

// ParseIDList reads a bigint[] in PostgreSQL's text form, {1,2,3}, as a
// database driver hands it over; NULL is nil.
func ParseIDList(src any) ([]int64, error) {
	var text string
	switch v := src.(type) {
	case nil:
		return nil, nil
	case string:
		text = v
	case []byte:
		text = string(v)
	default:
		return nil, fmt.Errorf("cannot scan %T into a list of IDs", src)
	}
	text = strings.Trim(text, "{}")
	out := []int64{}
	if text != "" {
		for _, f := range strings.Split(text, ",") {
			id, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("bad ID list %q: %w", text, err)
			}
			out = append(out, id)
		}
	}
	return out, nil
}

// IDListValue writes ids in PostgreSQL's text form; nil is NULL.
func IDListValue(ids []int64) driver.Value {
	if ids == nil {
		return nil
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// sharedBytes is raw, as the metadata of the job claimed after those in
// out: the previous job's if they are the same, as the jobs of one enqueue
// call have, or else a copy.
func sharedBytes(out []Claimed, raw sql.RawBytes) []byte {
	if len(raw) == 0 {
		return nil
	}
	if len(out) > 0 && bytes.Equal(out[len(out)-1].Metadata, raw) {
		return out[len(out)-1].Metadata
	}
	return bytes.Clone(raw)
}
