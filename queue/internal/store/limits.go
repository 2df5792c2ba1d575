package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Limits across every runner: at most Concurrency jobs PROCESSING at once,
// and at most Rate started in any Period, in a scope: a kind, a queue, or
// each partition key of a kind (the jobs' limit_key). They are enforced by
// the claim statements themselves (claimLimited), so a runner never claims
// what a limit forbids, and the slots of a dead runner come back with the
// rescue of its jobs: a scope's use is the count of its PROCESSING rows,
// never a counter kept beside them.
//
// A claim for a queue that no limit can touch runs claimSQL as before. A
// claim that a limit can touch locks the limits' rows first, in one order:
// two runners that claimed at once would otherwise both count 4 running of
// 5 and start one each. The claim that follows the lock must see what the
// claims it waited for committed, so it is a statement of its own, with a
// snapshot of its own; on PostgreSQL both run in a function that schema
// version 16 installs (sheaf_claim_limited, installed again by versions
// 19 and 21), in one round trip.

// The scopes of a limit.
const (
	ScopeKind  = "kind"  // jobs of the kind Target
	ScopeQueue = "queue" // jobs of the queue Target
	ScopeKey   = "key"   // jobs of the kind Target, each partition key apart
)

// Limit is a row of sheaf_limits. Zero Concurrency or Rate is no limit of
// that sort.
type Limit struct {
	Scope, Target string
	Concurrency   int
	Rate          int
	Period        time.Duration
	Suspended     bool
	// Fair, for a ScopeKey limit, makes claims take turns among the keys
	// of the kind (see fairSQL); it may be the limit's only setting.
	Fair bool
	// Weights, for a fair ScopeKey limit, gives keys more turns than
	// others (see weightedTurn): a key's weight, at least 1; a key not in
	// it weighs 1. Rows of sheaf_limit_weights (schema version 19).
	Weights   map[string]int
	ChangedBy string // "" for a limit declared at registration
	ChangedAt time.Time
}

// LimitUse is a limit's use: the jobs of its scope running, and those
// started in the last Period. For a ScopeKey limit they are of its busiest
// key, Key, and Keys holds every key in use, busiest first.
type LimitUse struct {
	Limit
	Key              string
	Running, Started int
	Keys             []KeyUse
}

// KeyUse is the use of one partition key of a ScopeKey limit.
type KeyUse struct {
	Key              string
	Running, Started int
}

// limitCandidates is how many due jobs a limited claim looks at for each
// slot it fills, when a limit may forbid some of those it looks at: those
// are passed over, up to this many.
const limitCandidates = 4

// candLimit is the SQL of how many due jobs a limited claim of n jobs
// looks at (cands, n × limitCandidates, or n): only n when no scope in use
// has less room than n, and no key limit allows fewer than n, so that
// none of the first n due jobs can be passed over. Each candidate is
// locked; a limit that does not bind then costs no more locks than no
// limit.
func candLimit(n, cands string) string {
	return `(SELECT CASE WHEN ` + limitsMayCut(n) + `
	THEN ` + cands + ` ELSE ` + n + ` END)`
}

// limitsMayCut is the SQL condition, after lim and room, that a limit may
// pass over one of the first n due jobs: a scope in use has less room than
// n, or a key limit allows fewer than n (a key nothing uses yet has its
// limit's whole room, see limitPick).
func limitsMayCut(n string) string {
	return `EXISTS (SELECT 1 FROM room WHERE room.n < ` + n + `)
	OR EXISTS (SELECT 1 FROM lim WHERE lim.scope = 'key' AND (lim.conc BETWEEN 1 AND ` + n + ` - 1 OR lim.rate BETWEEN 1 AND ` + n + ` - 1))`
}

// limitColumns are what the claims read of a limit.
const limitColumns = `scope, target, concurrency, rate, period_ms, fair`

// activeLimit is the condition that a row of sheaf_limits is in force.
const activeLimit = `NOT suspended AND (concurrency > 0 OR rate > 0 OR fair)`

// limitUse is the SQL of the use of each limited scope, as WITH items
// after lim (the limits, as scope, target, conc, rate, period_ms): running
// counts the PROCESSING jobs of each scope (and key) that has any, started
// the starts within the period, used lists the scopes and keys in use and
// every scope that has no keys. ago(p) is the time p milliseconds ago.
//
// Every job with a lease is in the lease index (locked_until is never
// -infinity): a range on it, unlike IS NOT NULL, reads the index even
// before the column has statistics, as after a bulk enqueue, when
// PostgreSQL took every row for leased and read the whole table.
func limitUse(ago func(string) string) string {
	return `running AS (
	SELECT l.scope, l.target, CASE WHEN l.scope = 'key' THEN coalesce(j.limit_key, '') ELSE '' END AS key, count(*) AS n
	FROM lim l JOIN sheaf_jobs j ON j.locked_until > '-infinity' AND j.status = 'PROCESSING'
		AND (CASE WHEN l.scope = 'queue' THEN j.queue ELSE j.kind END) = l.target
	GROUP BY l.scope, l.target, CASE WHEN l.scope = 'key' THEN coalesce(j.limit_key, '') ELSE '' END
), started AS (
	SELECT s.scope, s.target, s.key, count(*) AS n
	FROM lim l JOIN sheaf_limit_starts s ON s.scope = l.scope AND s.target = l.target AND s.at > ` + ago("l.period_ms") + `
	GROUP BY s.scope, s.target, s.key
), used AS (
	SELECT scope, target, '' AS key FROM lim WHERE scope <> 'key'
	UNION SELECT scope, target, key FROM running
	UNION SELECT scope, target, key FROM started
)`
}

// limitRoom is the SQL of what each scope (and key) in use may still
// start, a WITH item after limitUse's; least is the dialect's two-value
// minimum. A key that nothing uses has its limit's whole room (see
// limitPick).
func limitRoom(least string) string {
	return `room AS (
	SELECT u.scope, u.target, u.key,
		` + least + `(CASE WHEN l.conc > 0 THEN l.conc - coalesce(r.n, 0) ELSE 1000000000 END,
			CASE WHEN l.rate > 0 THEN l.rate - coalesce(s.n, 0) ELSE 1000000000 END) AS n
	FROM used u JOIN lim l ON l.scope = u.scope AND l.target = u.target
	LEFT JOIN running r ON r.scope = u.scope AND r.target = u.target AND r.key = u.key
	LEFT JOIN started s ON s.scope = u.scope AND s.target = u.target AND s.key = u.key
)`
}

// limitFull is the condition that a job j is of a scope with no room
// left. A count, not EXISTS: PostgreSQL made EXISTS an anti-join, which
// read the whole backlog and sorted it rather than walk the claim index.
const limitFull = `0 < (SELECT count(*) FROM room r WHERE r.n <= 0 AND (r.scope = 'queue' AND r.target = j.queue
	OR r.scope = 'kind' AND r.target = j.kind OR r.scope = 'key' AND r.target = j.kind AND r.key = coalesce(j.limit_key, '')))`

// limitPick is the SQL of the jobs a limited claim takes of the candidates
// in cand (id, kind, queue, key, priority, run_at), in claim order, or by
// turn first when turn (fairTurn, weightedTurn) is not empty: as many of
// each scope as its room allows, at most $2 in all. Placed, each has its
// place in that order, so that a fair claim returns its jobs in turns.
func limitPick(least, n, turn string, placed bool) string {
	order := `k.in_all`
	if turn != "" {
		order = turn + `, k.in_all`
	}
	cols := `k.id`
	if placed {
		cols, order = `k.id, row_number() OVER (ORDER BY `+order+`) AS place`, `place`
	}
	return `ranked AS (
	SELECT c.id, c.kind, c.queue, c.key,
		row_number() OVER (ORDER BY c.priority DESC, c.run_at, c.id) AS in_all,
		row_number() OVER (PARTITION BY c.queue ORDER BY c.priority DESC, c.run_at, c.id) AS in_queue,
		row_number() OVER (PARTITION BY c.kind ORDER BY c.priority DESC, c.run_at, c.id) AS in_kind,
		row_number() OVER (PARTITION BY c.kind, c.key ORDER BY c.priority DESC, c.run_at, c.id) AS in_key
	FROM cand c
), pick AS (
	SELECT ` + cols + ` FROM ranked k
	WHERE k.in_queue <= coalesce((SELECT n FROM room WHERE scope = 'queue' AND target = k.queue), k.in_queue)
		AND k.in_kind <= coalesce((SELECT n FROM room WHERE scope = 'kind' AND target = k.kind), k.in_kind)
		AND k.in_key <= coalesce((SELECT n FROM room WHERE scope = 'key' AND target = k.kind AND key = k.key),
			(SELECT ` + least + `(CASE WHEN conc > 0 THEN conc ELSE 1000000000 END, CASE WHEN rate > 0 THEN rate ELSE 1000000000 END)
				FROM lim WHERE scope = 'key' AND target = k.kind), k.in_key)
	ORDER BY ` + order + ` LIMIT ` + n + `
)`
}

// Fair share: among the keys of a kind with a fair ScopeKey limit, claims
// take turns. A claim looks, besides the first due jobs of its queue, at
// the first due jobs of every key of such a kind (fairSQL), and takes
// first the jobs whose keys have the fewest running (fairTurn): a key with
// a deep backlog then cannot hold back one with a few jobs enqueued after
// it. Claims with no fair limit in force run without any of it.

// fairSQL is the SQL of the WITH items that find the candidates of fair
// kinds, after lim, room and cand0 (the claim's other candidates), ending
// in cand: fkeys walks the keys of each fair kind with queued jobs, one
// index probe a key (sheaf_jobs_keyed), and fcand takes the first n due
// jobs of each, where cond (a condition on j) allows, locked on
// PostgreSQL (pg).
func fairSQL(cond, n string, pg bool) string {
	next := func(kind, after string) string {
		return `(SELECT min(x.limit_key) FROM sheaf_jobs x WHERE x.status = 'QUEUED' AND x.kind = ` + kind +
			` AND x.limit_key IS NOT NULL` + after + `)`
	}
	first := `SELECT j.id, j.kind, j.queue, coalesce(j.limit_key, '') AS key, j.priority, j.run_at FROM sheaf_jobs j
		WHERE j.kind = k.kind AND j.limit_key = k.key AND ` + cond + `
		ORDER BY priority DESC, run_at, id LIMIT ` + n
	fcand := `SELECT y.id, y.kind, y.queue, coalesce(y.limit_key, '') AS key, y.priority, y.run_at
	FROM fkeys k JOIN sheaf_jobs y ON y.id IN (` + strings.Replace(first, "j.id, j.kind, j.queue, coalesce(j.limit_key, '') AS key, j.priority, j.run_at", "j.id", 1) + `)
	WHERE k.key IS NOT NULL`
	if pg {
		fcand = `SELECT c.* FROM fkeys k CROSS JOIN LATERAL (` + first + ` FOR UPDATE OF j SKIP LOCKED) c WHERE k.key IS NOT NULL`
	}
	return `fkeys (kind, key) AS (
	SELECT l.target, ` + next("l.target", "") + ` FROM lim l WHERE l.scope = 'key' AND l.fair
	UNION ALL
	SELECT f.kind, ` + next("f.kind", " AND x.limit_key > f.key") + ` FROM fkeys f WHERE f.key IS NOT NULL
), fcand AS (
	` + fcand + `
), cand AS (
	SELECT * FROM cand0 UNION SELECT * FROM fcand
)`
}

// fairTurn is the SQL of a candidate k's turn in a fair claim: for a job of
// a fair kind, how many of its key run, plus its place among the key's
// candidates; 1 for any other job.
const fairTurn = `CASE WHEN k.kind IN (SELECT target FROM lim WHERE scope = 'key' AND fair)
	THEN k.in_key + coalesce((SELECT r.n FROM running r WHERE r.scope = 'key' AND r.target = k.kind AND r.key = k.key), 0) ELSE 1 END`

// weightedTurn is fairTurn counted in the key's weight (1 unless
// sheaf_limit_weights has one), each job in the middle of its share of a
// turn: a key of weight 3 has turns 1/6, 1/2, 5/6, 7/6 ..., one of weight
// 1 turns 1/2, 3/2 ..., so the first gets three claims to the second's one
// and, as jobs finish, three running to its one. At the start of its share
// (0, 1/3, 2/3 ...) or its end (1/3, 2/3, 1 ...) a heavy key would be
// ahead or behind by most of a light key's turn at every claim.
const weightedTurn = `CASE WHEN k.kind IN (SELECT target FROM lim WHERE scope = 'key' AND fair)
	THEN (k.in_key + coalesce((SELECT r.n FROM running r WHERE r.scope = 'key' AND r.target = k.kind AND r.key = k.key), 0) - 0.5)
		/ coalesce((SELECT w.weight FROM sheaf_limit_weights w WHERE w.target = k.kind AND w.limit_key = k.key), 1) ELSE 1 END`

// limItem is the WITH item lim: the limits in force that apply to a claim
// on the queues where queueIs (a condition on target) allows.
func limItem(queueIs string) string {
	return `lim AS (
	SELECT scope, target, concurrency AS conc, rate, period_ms, fair FROM sheaf_limits
	WHERE ` + activeLimit + ` AND (scope <> 'queue' OR ` + queueIs + `)
)`
}

// pgCandidates is the WITH item cand of the due jobs a limited claim looks
// at: those where (a condition on j) allows, in claim order, passing over
// those of full scopes, at most candLimit. From a cursor ($7 to $10, as
// claimFromSQL's $5 to $8) it reads the claim index from there, in the
// branches claimFromSQL reads.
func pgCandidates(where string, cursor, fair bool) string {
	cond := `status = 'QUEUED' AND ` + where + ` AND run_at <= now() AND NOT kind = ANY($5) AND NOT ` + limitFull
	limit := candLimit("$2", "$6")
	branch := func(name, extra string) string {
		return name + ` AS (
	SELECT j.id, j.kind, j.queue, coalesce(j.limit_key, '') AS key, j.priority, j.run_at FROM sheaf_jobs j
	WHERE ` + cond + extra + `
	ORDER BY priority DESC, run_at, id LIMIT ` + limit + ` FOR UPDATE OF j SKIP LOCKED
)`
	}
	switch {
	case fair:
		return branch("cand0", "") + ", " + fairSQL(cond, "$2", true)
	case !cursor:
		return branch("cand", "")
	}
	return branch("higher", " AND $7 AND priority > $8") + ", " + branch("onward", " AND priority = $8 AND (run_at, id) > ($9, $10)") +
		", " + branch("lower", " AND priority < $8") + `, cand AS (
	SELECT * FROM higher UNION ALL SELECT * FROM onward UNION ALL SELECT * FROM lower LIMIT ` + limit + `
)`
}

// pgClaimLimited is the claim within the limits, the body of the claim
// functions: $1 the queue (suspect: the queues), $2 to $5 as claimSQL's,
// $6 how many due jobs to look at (see candLimit), $7 to $10 the cursor;
// fair, among the keys of fair kinds (see fairSQL), from no cursor. It
// also records the starts of rate-limited scopes, and deletes those that
// fell out of their period. Of version 19 (v19), fair claims are weighted
// (weightedTurn, else fairTurn) and return their jobs in turns.
func pgClaimLimited(suspect, cursor, fair, v19 bool) string {
	turn, place, order := "", "", ""
	if fair {
		turn = fairTurn
	}
	if v19 {
		if fair {
			turn = weightedTurn
		}
		place, order = ", pick.place", " ORDER BY place"
	}
	// Started at the clock's time, not the transaction's: a claim that
	// waited for the limits' lock starts its jobs after the starts it
	// waited for, as the rate limits count them.
	where, set := `rescues = 0 AND queue = $1`, strings.Replace(claimSet, "started_at = now()", "started_at = clock_timestamp()", 1)
	queueIs := `target = $1`
	if suspect {
		where, queueIs = `rescues > 0 AND queue = ANY($1)`, `target = ANY($1)`
		set = `status = 'PROCESSING', claims = j.claims + 1, started_at = NULL,
	locked_until = now() + $3 * interval '1 millisecond', locked_by = $4, output = NULL`
	}
	ago := func(p string) string { return `clock_timestamp() - ` + p + ` * interval '1 millisecond'` }
	with := "WITH "
	if fair {
		with = "WITH RECURSIVE "
	}
	return `
` + with + limItem(queueIs) + `, ` + limitUse(ago) + `, ` + limitRoom("least") + `, ` + pgCandidates(where, cursor, fair) + `, ` +
		limitPick("least", "$2", turn, v19) + `, claimed AS (
	UPDATE sheaf_jobs j SET ` + set + `
	FROM pick WHERE j.id = pick.id
	RETURNING ` + claimColumns + ` AS meta, j.limit_key` + place + `
), logged AS (
	INSERT INTO sheaf_limit_starts (scope, target, key, at)
	SELECT l.scope, l.target, CASE WHEN l.scope = 'key' THEN coalesce(c.limit_key, '') ELSE '' END, clock_timestamp()
	FROM claimed c JOIN lim l ON l.rate > 0 AND (CASE WHEN l.scope = 'queue' THEN c.queue ELSE c.kind END) = l.target
), forgotten AS (
	DELETE FROM sheaf_limit_starts s USING lim l
	WHERE s.scope = l.scope AND s.target = l.target AND s.at <= ` + ago("l.period_ms") + `
)
SELECT id, kind, queue, priority, payload, correlation_id, attempts, claims, rescues, max_attempts, backoff, created_at,
	started_at, auth, run_at, run_id, period, parent_ids, total, meta FROM claimed` + order
}

// claimFunctions installs the limited claims as functions, as schema
// version (16, 19 or 21) installs them: of 19 on, fair claims are
// weighted and return their jobs in turns (see pgClaimLimited). Each
// locks the limits that apply to it, in one order, then claims in a
// statement of its own, which sees what the claims it waited for
// committed. sheaf_claim_limited claims on queue $1 as claimSQL does (from
// a cursor when $8 is not NULL; taking turns among the keys of fair kinds
// when $11), sheaf_claim_suspect_limited a suspect of the queues $1 as
// claimSuspectSQL does.
//
// Before version 21 the functions planned their claims at every call, for
// its arguments (plan_cache_mode = force_custom_plan): when a full scope
// was an EXISTS and the count of running jobs had no statistics to go by,
// a plan made for any arguments read and sorted the whole backlog. Since
// those were fixed, the plan PostgreSQL keeps for any arguments walks the
// claim index as a claim's own does, and planning a claim at every call
// cost 4 to 5 ms of the 5 to 8 ms it took on a loaded two-core machine
// (100 jobs over backlogs of 400 to 40,000, stale statistics, few due,
// closed kinds, from a cursor: 0.6 to 2.5 ms each from the kept plan).
// PostgreSQL still plans the first five calls of each connection for
// their arguments and keeps the general plan only while it costs no more.
func claimFunctions(version int) string {
	planning := ""
	if version < 21 {
		planning = "SET plan_cache_mode = force_custom_plan "
	}
	v19 := version >= 19
	return `
CREATE OR REPLACE FUNCTION sheaf_claim_limited(text, integer, bigint, text, text[], integer, boolean, integer, timestamptz, bigint,
	boolean)
RETURNS TABLE (` + claimedTypes + `) LANGUAGE plpgsql ` + planning + `AS $fn$
BEGIN
	PERFORM 1 FROM sheaf_limits WHERE ` + activeLimit + ` AND (scope <> 'queue' OR target = $1) ORDER BY scope, target FOR UPDATE;
	IF $11 THEN
		RETURN QUERY ` + pgClaimLimited(false, false, true, v19) + `;
	ELSIF $8 IS NULL THEN
		RETURN QUERY ` + pgClaimLimited(false, false, false, v19) + `;
	ELSE
		RETURN QUERY ` + pgClaimLimited(false, true, false, v19) + `;
	END IF;
END $fn$;
CREATE OR REPLACE FUNCTION sheaf_claim_suspect_limited(text[], integer, bigint, text, text[], integer)
RETURNS TABLE (` + claimedTypes + `) LANGUAGE plpgsql ` + planning + `AS $fn$
BEGIN
	PERFORM 1 FROM sheaf_limits WHERE ` + activeLimit + ` AND (scope <> 'queue' OR target = ANY($1)) ORDER BY scope, target FOR UPDATE;
	RETURN QUERY ` + pgClaimLimited(true, false, false, v19) + `;
END $fn$;
`
}

// claimedTypes are the columns the claim functions return, as claimColumns.
const claimedTypes = `c_id bigint, c_kind text, c_queue text, c_priority smallint, c_payload jsonb, c_correlation_id text,
	c_attempts integer, c_claims integer, c_rescues integer, c_max_attempts integer, c_backoff jsonb, c_created_at timestamptz,
	c_started_at timestamptz, c_auth jsonb, c_run_at timestamptz, c_run_id text, c_period text, c_parent_ids bigint[],
	c_total bigint, c_meta bytea`

// scanLimits reads rows of limitColumns.
func scanLimits(rows *sql.Rows) ([]Limit, error) {
	defer rows.Close()
	return readLimits(rows)
}

// readLimits reads rows of limitColumns, leaving rows open: they may
// hold the results of statements after theirs.
func readLimits(rows *sql.Rows) ([]Limit, error) {
	var out []Limit
	for rows.Next() {
		var l Limit
		var ms int64
		if err := rows.Scan(&l.Scope, &l.Target, &l.Concurrency, &l.Rate, &ms, &l.Fair); err != nil {
			return nil, err
		}
		l.Period = time.Duration(ms) * time.Millisecond
		out = append(out, l)
	}
	return out, rows.Err()
}

// claimLimited claims within the limits that apply to queues (suspect) or
// to c.Queue, in one call of a claim function (see claimFunctionsSQL).
// With no limit left to apply, it claims as Claim does without limits.
func (h *held) claimLimited(ctx context.Context, c Claim, suspect bool, queues []string) (out []Claimed, err error) {
	closed := c.ClosedKinds
	if closed == nil {
		closed = []string{}
	}
	if suspect {
		return h.claimed(ctx, 1, `SELECT * FROM sheaf_claim_suspect_limited($1, $2, $3, $4, $5, $6)`,
			queues, 1, c.Lease.Milliseconds(), c.Runner, closed, limitCandidates)
	}
	args := []any{c.Queue, c.N, c.Lease.Milliseconds(), c.Runner, closed, c.N * limitCandidates, false, nil, nil, nil, c.Fair}
	if c.From != nil && !c.Fair {
		args[6], args[7], args[8], args[9] = c.Higher, c.From.Priority, c.From.RunAt, c.From.ID
	}
	return h.claimed(ctx, c.N, `SELECT * FROM sheaf_claim_limited($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, args...)
}

// holdsSQL reads, in one statement, what holds a runner's claims back:
// the paused queues (as limits of scope "") and the limits in force. A
// runner reads them together once a poll interval, so that limits cost
// nothing where none is set (see Conn.Holds).
const holdsSQL = `SELECT '', name, 0, 0, 0, false FROM sheaf_queues WHERE paused_at IS NOT NULL
UNION ALL SELECT ` + limitColumns + ` FROM sheaf_limits WHERE ` + activeLimit

// scanHolds reads the rows of holdsSQL.
func scanHolds(rows *sql.Rows, err error) (paused []string, limits []Limit, _ error) {
	if err != nil {
		return nil, nil, err
	}
	all, err := scanLimits(rows)
	for _, l := range all {
		if l.Scope == "" {
			paused = append(paused, l.Target)
		} else {
			limits = append(limits, l)
		}
	}
	return paused, limits, err
}

// Holds returns the paused queues and the limits in force.
func (h *held) Holds(ctx context.Context) (paused []string, limits []Limit, err error) {
	defer func() { h.DropOn(err) }()
	return scanHolds(h.query(ctx, holdsSQL))
}

// ErrNoLimit is returned for a limit that does not exist.
var ErrNoLimit = errors.New("no such limit")

// SetLimit writes l, by l.ChangedBy; a limit declared at registration
// (ChangedBy "") replaces only one that was declared too, so an operator's
// change stands until the operator removes it. It returns whether it
// wrote. The starts recorded for a limit that no longer limits the rate
// are deleted with it.
func (s *postgres) SetLimit(ctx context.Context, db *gorm.DB, l Limit) (wrote bool, err error) {
	err = s.Tx(ctx, db, func(tx *gorm.DB) error {
		wrote, err = setLimit(ctx, tx, l, gorm.Expr("now()"))
		return err
	})
	return wrote, err
}

// setLimitSQL upserts a limit (see SetLimit).
const setLimitSQL = `INSERT INTO sheaf_limits (scope, target, concurrency, rate, period_ms, fair, suspended, changed_by, changed_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (scope, target) DO UPDATE SET concurrency = excluded.concurrency, rate = excluded.rate,
		period_ms = excluded.period_ms, fair = excluded.fair, suspended = excluded.suspended, changed_by = excluded.changed_by,
		changed_at = excluded.changed_at
	WHERE excluded.changed_by <> '' OR sheaf_limits.changed_by = ''`

func setLimit(ctx context.Context, db *gorm.DB, l Limit, at any) (bool, error) {
	db = db.WithContext(ctx)
	res := db.Exec(setLimitSQL, l.Scope, l.Target, l.Concurrency, l.Rate, l.Period.Milliseconds(), l.Fair, l.Suspended, l.ChangedBy, at)
	if res.Error != nil {
		return false, res.Error
	}
	if res.RowsAffected == 0 {
		return false, nil
	}
	if l.Rate == 0 {
		if err := db.Exec(`DELETE FROM sheaf_limit_starts WHERE scope = ? AND target = ?`, l.Scope, l.Target).Error; err != nil {
			return false, err
		}
	}
	return true, setWeights(db, l)
}

// setWeights replaces the weights of a ScopeKey limit's keys with
// l.Weights, in the transaction that writes the limit.
func setWeights(tx *gorm.DB, l Limit) error {
	if l.Scope != ScopeKey {
		return nil
	}
	if err := tx.Exec(`DELETE FROM sheaf_limit_weights WHERE target = ?`, l.Target).Error; err != nil || len(l.Weights) == 0 {
		return err
	}
	keys := slices.Sorted(maps.Keys(l.Weights))
	args := make([]any, 0, 3*len(keys))
	for _, k := range keys {
		args = append(args, l.Target, k, l.Weights[k])
	}
	return tx.Exec(`INSERT INTO sheaf_limit_weights (target, limit_key, weight) VALUES `+
		strings.TrimSuffix(strings.Repeat("(?, ?, ?), ", len(keys)), ", "), args...).Error
}

// RemoveLimit deletes the limit of scope and target, and its starts, or
// returns ErrNoLimit.
func (s *postgres) RemoveLimit(ctx context.Context, db *gorm.DB, scope, target string) error {
	return s.Tx(ctx, db, func(tx *gorm.DB) error { return removeLimit(ctx, tx, scope, target) })
}

func removeLimit(ctx context.Context, db *gorm.DB, scope, target string) error {
	res := db.WithContext(ctx).Exec(`DELETE FROM sheaf_limits WHERE scope = ? AND target = ?`, scope, target)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("%w: %s %q", ErrNoLimit, scope, target)
	}
	if err := db.WithContext(ctx).Exec(`DELETE FROM sheaf_limit_starts WHERE scope = ? AND target = ?`, scope, target).Error; err != nil {
		return err
	}
	return setWeights(db.WithContext(ctx), Limit{Scope: scope, Target: target})
}

// limitUseSQL reads every limit with the use of its scopes: running and
// started as the claims count them (limitRoom), each key of a ScopeKey
// limit apart. ago(p) is the time p milliseconds before now.
func limitUseSQL(ago func(string) string) string {
	return `WITH lim AS (
	SELECT scope, target, concurrency AS conc, rate, period_ms, fair FROM sheaf_limits
), ` + limitUse(ago) + `
SELECT l.scope, l.target, l.concurrency, l.rate, l.period_ms, l.fair, l.suspended, l.changed_by, l.changed_at,
	coalesce(u.key, ''), coalesce(r.n, 0), coalesce(s.n, 0)
FROM sheaf_limits l
LEFT JOIN used u ON u.scope = l.scope AND u.target = l.target
LEFT JOIN running r ON r.scope = u.scope AND r.target = u.target AND r.key = u.key
LEFT JOIN started s ON s.scope = u.scope AND s.target = u.target AND s.key = u.key
ORDER BY l.scope, l.target, coalesce(r.n, 0) DESC, coalesce(s.n, 0) DESC, u.key`
}

// Limits returns every limit with its use, by scope and target.
func (s *postgres) Limits(ctx context.Context, db *gorm.DB) ([]LimitUse, error) {
	ago := func(p string) string { return `now() - ` + p + ` * interval '1 millisecond'` }
	return readLimitUse(ctx, db, limitUseSQL(ago))
}

// readLimitUse reads the rows of limitUseSQL, folding the keys of each
// limit into it, and the limits' weights.
func readLimitUse(ctx context.Context, db *gorm.DB, query string, args ...any) ([]LimitUse, error) {
	out, err := readUseRows(ctx, db, query, args...)
	if err != nil {
		return nil, err
	}
	err = scanWeights(db.WithContext(ctx).Raw(`SELECT target, limit_key, weight FROM sheaf_limit_weights`).Rows())(
		func(target, key string, w int) {
			if i := slices.IndexFunc(out, func(u LimitUse) bool { return u.Scope == ScopeKey && u.Target == target }); i >= 0 {
				if out[i].Weights == nil {
					out[i].Weights = map[string]int{}
				}
				out[i].Weights[key] = w
			}
		})
	return out, err
}

// scanWeights reads rows of sheaf_limit_weights (target, limit_key,
// weight), handing each to add, and closes rows.
func scanWeights(rows *sql.Rows, err error) func(add func(target, key string, w int)) error {
	return func(add func(target, key string, w int)) error {
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var target, key string
			var w int
			if err := rows.Scan(&target, &key, &w); err != nil {
				return err
			}
			add(target, key, w)
		}
		return rows.Err()
	}
}

func readUseRows(ctx context.Context, db *gorm.DB, query string, args ...any) ([]LimitUse, error) {
	rows, err := db.WithContext(ctx).Raw(query, args...).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []LimitUse
	for rows.Next() {
		var u LimitUse
		var ms int64
		var k KeyUse
		var at sqlTime
		if err := rows.Scan(&u.Scope, &u.Target, &u.Concurrency, &u.Rate, &ms, &u.Fair, &u.Suspended, &u.ChangedBy, &at,
			&k.Key, &k.Running, &k.Started); err != nil {
			return nil, err
		}
		u.Period, u.ChangedAt = time.Duration(ms)*time.Millisecond, at.t
		if n := len(out); n > 0 && out[n-1].Scope == u.Scope && out[n-1].Target == u.Target {
			out[n-1].Keys = append(out[n-1].Keys, k)
			continue
		}
		u.Key, u.Running, u.Started = k.Key, k.Running, k.Started
		if u.Scope == ScopeKey && (k.Running > 0 || k.Started > 0) {
			u.Keys = []KeyUse{k}
		}
		out = append(out, u)
	}
	return out, rows.Err()
}
