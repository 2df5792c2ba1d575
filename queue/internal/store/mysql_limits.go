package store

import (
	"cmp"
	"context"
	"database/sql"
	"maps"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Limits on MariaDB: the semantics of limits.go, in several statements of
// one transaction. The claim locks the limits that apply to it (FOR
// UPDATE, in one order), reads their use with limits.go's SQL, locks its
// candidates, the due jobs of no full scope (SKIP LOCKED), and picks among
// them in Go as limitPick does: MariaDB has no UPDATE ... RETURNING and
// locks no rows in a WITH item. At READ COMMITTED each statement after the
// lock sees what the claims it waited for committed.

// mysqlAgo is the time p milliseconds ago.
func mysqlAgo(p string) string { return mysqlNow + ` - INTERVAL (` + p + `) * 1000 MICROSECOND` }

// mysqlSQL is limits.go's SQL for MariaDB: key is a reserved word there,
// a UNION's column is as wide as its first SELECT's (the empty key of
// the first would cut the others' to nothing), and no lease is NULL, not -infinity.
func mysqlSQL(q string) string {
	return strings.NewReplacer("'' AS key", "CAST('' AS CHAR(255)) AS `key`", "AS key", "AS `key`", "target, key FROM", "target, `key` FROM",
		"j.locked_until > '-infinity'", "j.locked_until IS NOT NULL").Replace(q)
}

// mysqlLimitsFor is the condition that a limit in force applies to a
// claim on queues, and its arguments.
func mysqlLimitsFor(queues []string) (string, []any) {
	qs, args := placeholders(queues)
	return activeLimit + ` AND (scope <> 'queue' OR target IN (` + qs + `))`, args
}

// mysqlRoom is a scope's room and running jobs, as limitRoom and running
// count them.
type mysqlRoom struct{ n, running int }

// mysqlScope names a scope (and key) in the maps of a limited claim.
type mysqlScope struct{ scope, target, key string }

// mysqlCand is a candidate of a limited claim.
type mysqlCand struct {
	id                     int64
	kind, queue, key       string
	priority               int
	runAt                  time.Time
	inQueue, inKind, inKey int
}

// claimLimited claims within the limits that apply to queues (suspect)
// or to c.Queue. From a cursor it reads from the queue's start: the limited
// claim is the slower path already.
func (s *mysql) claimLimited(ctx context.Context, c Claim, suspect bool, queues []string) ([]Claimed, error) {
	set, setArgs := mysqlClaimSet, []any{c.Lease.Microseconds(), c.Runner}
	where, whereArgs := `rescues = 0 AND queue = ?`, []any{c.Queue}
	if suspect {
		set = mysqlClaimSuspectSet
		qs, args := placeholders(queues)
		where, whereArgs = `rescues > 0 AND queue IN (`+qs+`)`, args
	}
	applies, appliesArgs := mysqlLimitsFor(queues)
	rated := false // a limit that applies counts starts: read under the limits' lock, so no other claim changes it
	return s.claimThen(ctx, func(tx *sql.Tx) ([]int64, error) {
		// The limits locked, then their rooms read, in one batch: each
		// statement at READ COMMITTED sees what committed before it began,
		// so the rooms are read after the claims that held the lock.
		var lims []Limit
		var room map[mysqlScope]mysqlRoom
		if err := s.batch(ctx, tx, mysqlStmt{
			query: `SELECT ` + limitColumns + ` FROM sheaf_limits WHERE ` + applies + ` ORDER BY scope, target FOR UPDATE`,
			args:  appliesArgs,
			read: func(rows *sql.Rows) (err error) {
				lims, err = readLimits(rows)
				return err
			},
		}, mysqlRooms(applies, appliesArgs, &room)); err != nil {
			return nil, err
		}
		rated = slices.ContainsFunc(lims, func(l Limit) bool { return l.Rate > 0 })
		closed, closedArgs := notIn("kind", c.ClosedKinds)
		full, fullArgs := mysqlFull(room)
		cond := `status = 'QUEUED' AND ` + where + ` AND run_at <= ` + mysqlNow + closed + full
		condArgs := slices.Concat(whereArgs, closedArgs, fullArgs)
		cands, err := mysqlCands(ctx, tx, `SELECT id FROM sheaf_jobs WHERE `+cond+` ORDER BY priority DESC, run_at, id LIMIT `+
			itoa(mysqlCandLimit(c.N, lims, room)), condArgs)
		if err != nil {
			return nil, err
		}
		fair := map[string]bool{}
		for _, l := range lims {
			if c.Fair && !suspect && l.Scope == ScopeKey && l.Fair {
				fair[l.Target] = true
				// The first due jobs of each of the kind's keys.
				more, err := mysqlCands(ctx, tx, `SELECT id FROM (SELECT id,
					row_number() OVER (PARTITION BY limit_key ORDER BY priority DESC, run_at, id) AS rn
					FROM sheaf_jobs WHERE kind = ? AND limit_key IS NOT NULL AND `+cond+`) x WHERE rn <= ?`,
					slices.Concat([]any{l.Target}, condArgs, []any{c.N}))
				if err != nil {
					return nil, err
				}
				for _, m := range more {
					if !slices.ContainsFunc(cands, func(c mysqlCand) bool { return c.id == m.id }) {
						cands = append(cands, m)
					}
				}
			}
		}
		weights, err := mysqlWeights(ctx, tx, fair)
		if err != nil {
			return nil, err
		}
		return mysqlPick(cands, lims, room, weights, c.N), nil
	}, func(list string) []mysqlStmt {
		if !rated {
			return nil // no starts to record; a limit's starts go with its rate (see setLimit)
		}
		return mysqlStarts(list, applies, appliesArgs)
	}, set, setArgs...)
}

// mysqlStarts records the starts of the claimed jobs list in their
// rate-limited scopes at their started_at, the time the rate limits are
// measured by (a suspect's is its claim's), and deletes the starts that
// fell out of their period of the limits that apply (the claim's, whose
// rows it has locked: claims under other limits do not meet on theirs).
func mysqlStarts(list, applies string, args []any) []mysqlStmt {
	return []mysqlStmt{{query: `INSERT INTO sheaf_limit_starts (scope, target, ` + "`key`" + `, at)
		SELECT l.scope, l.target, CASE WHEN l.scope = 'key' THEN coalesce(c.limit_key, '') ELSE '' END, coalesce(c.started_at, ` + mysqlNow + `)
		FROM sheaf_jobs c JOIN sheaf_limits l ON NOT l.suspended AND l.rate > 0
			AND (CASE WHEN l.scope = 'queue' THEN c.queue ELSE c.kind END) = l.target
		WHERE c.id IN (` + list + `)`}, {query: `DELETE s FROM sheaf_limit_starts s
		JOIN (SELECT scope, target, period_ms FROM sheaf_limits WHERE ` + applies + `) l ON l.scope = s.scope AND l.target = s.target
		WHERE s.at <= ` + mysqlAgo("l.period_ms"), args: args}}
}

// mysqlRooms is the statement that reads the room of each scope in use of
// the limits that apply, with limitUse and limitRoom, into *out.
func mysqlRooms(applies string, args []any, out *map[mysqlScope]mysqlRoom) mysqlStmt {
	return mysqlStmt{query: mysqlSQL(`WITH lim AS (
	SELECT scope, target, concurrency AS conc, rate, period_ms, fair FROM sheaf_limits WHERE ` + applies + `
), ` + limitUse(mysqlAgo) + `, ` + limitRoom("LEAST") + `
SELECT r.scope, r.target, r.key, r.n, coalesce(x.n, 0) FROM room r
LEFT JOIN running x ON x.scope = r.scope AND x.target = r.target AND x.key = r.key`), args: args, read: func(rows *sql.Rows) error {
		*out = map[mysqlScope]mysqlRoom{}
		for rows.Next() {
			var k mysqlScope
			var r mysqlRoom
			if err := rows.Scan(&k.scope, &k.target, &k.key, &r.n, &r.running); err != nil {
				return err
			}
			(*out)[k] = r
		}
		return rows.Err()
	}}
}

// mysqlFull is the condition that a job is of no scope without room (as
// limitFull), and its arguments.
func mysqlFull(room map[mysqlScope]mysqlRoom) (string, []any) {
	var cond []string
	var args []any
	for k, r := range room {
		if r.n > 0 {
			continue
		}
		switch k.scope {
		case ScopeQueue:
			cond, args = append(cond, "queue = ?"), append(args, k.target)
		case ScopeKind:
			cond, args = append(cond, "kind = ?"), append(args, k.target)
		default:
			cond, args = append(cond, "(kind = ? AND coalesce(limit_key, '') = ?)"), append(args, k.target, k.key)
		}
	}
	if len(cond) == 0 {
		return "", nil
	}
	return " AND NOT (" + strings.Join(cond, " OR ") + ")", args
}

// mysqlCandLimit is candLimit: how many due jobs a claim of n looks at.
func mysqlCandLimit(n int, lims []Limit, room map[mysqlScope]mysqlRoom) int {
	for _, r := range room {
		if r.n < n {
			return n * limitCandidates
		}
	}
	for _, l := range lims {
		if l.Scope == ScopeKey && (l.Concurrency >= 1 && l.Concurrency < n || l.Rate >= 1 && l.Rate < n) {
			return n * limitCandidates
		}
	}
	return n
}

// mysqlCands locks the jobs query selects (IDs), skipping those another
// claim has locked, and reads them in claim order.
func mysqlCands(ctx context.Context, tx *sql.Tx, query string, args []any) ([]mysqlCand, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, kind, queue, coalesce(limit_key, ''), priority, run_at FROM sheaf_jobs
		WHERE id IN (SELECT id FROM (`+query+`) ids) AND status = 'QUEUED'
		ORDER BY priority DESC, run_at, id FOR UPDATE SKIP LOCKED`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []mysqlCand
	for rows.Next() {
		var c mysqlCand
		if err := rows.Scan(&c.id, &c.kind, &c.queue, &c.key, &c.priority, &c.runAt); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// mysqlWeights reads the weights of the keys of the fair kinds: a kind's
// map, empty if none has a weight, for each kind in fair.
func mysqlWeights(ctx context.Context, tx *sql.Tx, fair map[string]bool) (map[string]map[string]int, error) {
	if len(fair) == 0 {
		return nil, nil
	}
	out := map[string]map[string]int{}
	for k := range fair {
		out[k] = map[string]int{}
	}
	qs, args := placeholders(slices.Sorted(maps.Keys(fair)))
	err := scanWeights(tx.QueryContext(ctx, `SELECT target, limit_key, weight FROM sheaf_limit_weights WHERE target IN (`+qs+`)`, args...))(
		func(target, key string, w int) { out[target][key] = w })
	return out, err
}

// mysqlPick is limitPick: of the candidates, as many of each scope as its
// room allows, at most n, in claim order or, for the kinds in fair (a
// fair kind's weights of its keys), taking turns among their keys
// (weightedTurn).
func mysqlPick(cands []mysqlCand, lims []Limit, room map[mysqlScope]mysqlRoom, fair map[string]map[string]int, n int) []int64 {
	slices.SortFunc(cands, func(a, b mysqlCand) int {
		return cmp.Or(cmp.Compare(b.priority, a.priority), a.runAt.Compare(b.runAt), cmp.Compare(a.id, b.id))
	})
	seen := map[mysqlScope]int{}
	keyRoom := map[string]int{} // a key limit's room for a key nothing uses
	for _, l := range lims {
		if l.Scope == ScopeKey {
			keyRoom[l.Target] = min(cmp.Or(l.Concurrency, 1000000000), cmp.Or(l.Rate, 1000000000))
		}
	}
	type turn struct {
		id    int64
		turn  float64
		inAll int
	}
	var picked []turn
	for i := range cands {
		c := &cands[i]
		seen[mysqlScope{ScopeQueue, c.queue, ""}]++
		seen[mysqlScope{ScopeKind, c.kind, ""}]++
		seen[mysqlScope{ScopeKey, c.kind, c.key}]++
		c.inQueue, c.inKind, c.inKey = seen[mysqlScope{ScopeQueue, c.queue, ""}], seen[mysqlScope{ScopeKind, c.kind, ""}],
			seen[mysqlScope{ScopeKey, c.kind, c.key}]
		if r, ok := room[mysqlScope{ScopeQueue, c.queue, ""}]; ok && c.inQueue > r.n {
			continue
		}
		if r, ok := room[mysqlScope{ScopeKind, c.kind, ""}]; ok && c.inKind > r.n {
			continue
		}
		if r, ok := room[mysqlScope{ScopeKey, c.kind, c.key}]; ok {
			if c.inKey > r.n {
				continue
			}
		} else if k, ok := keyRoom[c.kind]; ok && c.inKey > k {
			continue
		}
		t := turn{c.id, 1, i}
		if w, ok := fair[c.kind]; ok {
			t.turn = (float64(c.inKey+room[mysqlScope{ScopeKey, c.kind, c.key}].running) - 0.5) / float64(cmp.Or(w[c.key], 1))
		}
		picked = append(picked, t)
	}
	slices.SortStableFunc(picked, func(a, b turn) int { return cmp.Or(cmp.Compare(a.turn, b.turn), cmp.Compare(a.inAll, b.inAll)) })
	ids := make([]int64, 0, min(n, len(picked)))
	for _, t := range picked[:min(n, len(picked))] {
		ids = append(ids, t.id)
	}
	return ids
}

func (c mysqlConn) ClaimSuspectLimited(ctx context.Context, queues []string, cl Claim) ([]Claimed, error) {
	cl.N = 1
	return c.s.claimLimited(ctx, cl, true, queues)
}

// Holds returns the paused queues and the limits in force.
func (c mysqlConn) Holds(ctx context.Context) (paused []string, limits []Limit, err error) {
	return scanHolds(c.s.db.QueryContext(ctx, holdsSQL))
}

// SetLimit writes l as limits.go's setLimit does; the upsert's condition
// is each column's, changed_by last, since MariaDB's assignments see the
// ones before them.
func (s *mysql) SetLimit(ctx context.Context, db *gorm.DB, l Limit) (wrote bool, err error) {
	err = s.Tx(ctx, db, func(tx *gorm.DB) error {
		var by []string
		if err := tx.Raw(`SELECT changed_by FROM sheaf_limits WHERE scope = ? AND target = ?`, l.Scope, l.Target).Scan(&by).Error; err != nil {
			return err
		}
		if wrote = l.ChangedBy != "" || len(by) == 0 || by[0] == ""; !wrote {
			return nil
		}
		const ok = `VALUES(changed_by) <> '' OR changed_by = ''`
		cols := []string{"concurrency", "rate", "period_ms", "fair", "suspended", "changed_at", "changed_by"}
		sets := make([]string, len(cols))
		for i, c := range cols {
			sets[i] = c + ` = IF(` + ok + `, VALUES(` + c + `), ` + c + `)`
		}
		if err := tx.Exec(`INSERT INTO sheaf_limits (scope, target, concurrency, rate, period_ms, fair, suspended, changed_by, changed_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, `+mysqlNow+`) ON DUPLICATE KEY UPDATE `+strings.Join(sets, ", "),
			l.Scope, l.Target, l.Concurrency, l.Rate, l.Period.Milliseconds(), l.Fair, l.Suspended, l.ChangedBy).Error; err != nil {
			return err
		}
		if l.Rate == 0 {
			if err := tx.Exec(`DELETE FROM sheaf_limit_starts WHERE scope = ? AND target = ?`, l.Scope, l.Target).Error; err != nil {
				return err
			}
		}
		return setWeights(tx, l)
	})
	return wrote, err
}

func (s *mysql) RemoveLimit(ctx context.Context, db *gorm.DB, scope, target string) error {
	return s.Tx(ctx, db, func(tx *gorm.DB) error { return removeLimit(ctx, tx, scope, target) })
}

func (s *mysql) Limits(ctx context.Context, db *gorm.DB) ([]LimitUse, error) {
	return readLimitUse(ctx, db, mysqlSQL(limitUseSQL(mysqlAgo)))
}
