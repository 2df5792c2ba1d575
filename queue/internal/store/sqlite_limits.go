package store

import (
	"context"
	"database/sql"
	"strings"

	"gorm.io/gorm"
)

// Limits on SQLite: the same statements as PostgreSQL's (limits.go) but
// for the clock and the binding. A claim is one statement in the
// process's turn to write, and SQLite has one writer at a time, so claims
// need no lock of their own to count their limits' use one after another.

// sqliteAgo is the time p milliseconds before ?1, as timeLayout writes it.
func sqliteAgo(p string) string {
	return `strftime('%Y-%m-%d %H:%M:%f000000+00:00', ?1, '-' || (` + p + ` / 1000.0) || ' seconds')`
}

// sqliteClaimLimitedSQL is claimLimitedSQL on SQLite: ?1 now, ?2 lease
// end, ?3 runner, ?4 the queues (JSON), ?5 the queue, ?6 closed kinds
// (JSON), ?7 how many due jobs to look at, ?8 how many to claim;
// sqliteClaimFairSQL takes turns among the keys of fair kinds, and returns
// each job's place in turns after its columns. The limits are read here:
// no other writer runs meanwhile.
var sqliteClaimLimitedSQL, sqliteClaimFairSQL, sqliteClaimLimitedSuspectSQL = sqliteClaimLimited(false, false),
	sqliteClaimLimited(false, true), sqliteClaimLimited(true, false)

func sqliteClaimLimited(suspect, fair bool) string {
	from, where, set := `sheaf_jobs AS j INDEXED BY sheaf_jobs_claim`, `rescues = 0 AND queue = ?5`,
		`attempts = attempts + 1, started_at = ?1`
	if suspect {
		from, where, set = `sheaf_jobs AS j`, `rescues > 0 AND `+inList("queue", "?4"), `started_at = NULL`
	}
	cond := `status = 'QUEUED' AND ` + where + ` AND run_at <= ?1 AND NOT ` + inList("kind", "?6") + ` AND NOT ` + limitFull
	with, cand, more, turn, place := "WITH", "cand", "", "", ""
	if fair {
		with, cand, more, turn = "WITH RECURSIVE", "cand0", ", "+fairSQL(cond, "?8", false), weightedTurn
		place = `, (SELECT place FROM pick WHERE pick.id = sheaf_jobs.id)`
	}
	// Materialized: SQLite would otherwise compute the use again for
	// every job it looks at, which took a second for forty jobs.
	return strings.ReplaceAll(`
`+with+` `+limItem(inList("target", "?4"))+`, `+limitUse(sqliteAgo)+`, `+limitRoom("min")+`, `+cand+` AS (
	SELECT j.id, j.kind, j.queue, coalesce(j.limit_key, '') AS key, j.priority, j.run_at FROM `+from+`
	WHERE `+cond+`
	ORDER BY priority DESC, run_at, id LIMIT `+candLimit("?8", "?7")+`
)`+more+`, `+limitPick("min", "?8", turn, fair)+`
UPDATE sheaf_jobs SET status = 'PROCESSING', `+set+`, claims = claims + 1, locked_until = ?2, locked_by = ?3, output = NULL
WHERE id IN (SELECT id FROM pick)
RETURNING `+sqliteClaimColumns+place, " AS (", " AS MATERIALIZED (")
}

// sqliteRoomySQL is whether no limit in force on the queues ?4 can pass
// over any of the first ?8 due jobs (limitsMayCut, ?1 now): then a plain
// claim (sqliteClaimSQL) takes what the limited one that does not take
// turns would, without its ranking of candidates, which cost a limit that
// never binds a third of the claims' speed.
var sqliteRoomySQL = strings.ReplaceAll(`WITH `+limItem(inList("target", "?4"))+`, `+limitUse(sqliteAgo)+`, `+limitRoom("min")+`
SELECT NOT (`+limitsMayCut("?8")+`)`, " AS (", " AS MATERIALIZED (")

// sqliteStartsSQL records the starts of the jobs ?2 (JSON IDs) at ?1 in
// their rate-limited scopes, and sqliteForgetStartsSQL deletes the starts
// that fell out of their period.
const sqliteStartsSQL = `INSERT INTO sheaf_limit_starts (scope, target, key, at)
SELECT l.scope, l.target, CASE WHEN l.scope = 'key' THEN coalesce(c.limit_key, '') ELSE '' END, ?1
FROM sheaf_jobs c JOIN sheaf_limits l ON NOT l.suspended AND l.rate > 0
	AND (CASE WHEN l.scope = 'queue' THEN c.queue ELSE c.kind END) = l.target
WHERE ` + `c.id IN (SELECT value FROM json_each(?2))`

var sqliteForgetStartsSQL = `DELETE FROM sheaf_limit_starts AS s WHERE EXISTS (SELECT 1 FROM sheaf_limits l
	WHERE l.scope = s.scope AND l.target = s.target AND s.at <= ` + sqliteAgo("l.period_ms") + `)`

// claimLimited claims within the limits in force, and records the starts,
// in one transaction in the process's turn to write.
func (s *sqlite) claimLimited(ctx context.Context, c Claim, suspect bool, queues []string) (out []Claimed, err error) {
	query := sqliteClaimLimitedSQL
	switch {
	case suspect:
		query = sqliteClaimLimitedSuspectSQL
	case c.Fair:
		query = sqliteClaimFairSQL
	}
	err = s.writing(ctx, func() error {
		t := now() // in the turn to write: claims start their jobs in the order they count the starts
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		now, until, closed := sqliteTime(t), sqliteTime(t.Add(c.Lease)), jsonStrings(c.ClosedKinds)
		args := []any{now, until, c.Runner, jsonStrings(queues), c.Queue, closed, c.N * limitCandidates, c.N}
		roomy := false
		if !suspect && !c.Fair {
			check, err := s.prepared(ctx, sqliteRoomySQL)
			if err != nil {
				return err
			}
			if err := tx.StmtContext(ctx, check).QueryRowContext(ctx, args...).Scan(&roomy); err != nil {
				return err
			}
		}
		var rows *sql.Rows
		if roomy {
			rows, err = tx.QueryContext(ctx, sqliteClaimSQL, now, until, c.Runner, c.Queue, closed, c.N)
		} else {
			stmt, perr := s.prepared(ctx, query)
			if perr != nil {
				return perr
			}
			rows, err = tx.StmtContext(ctx, stmt).QueryContext(ctx, args...)
		}
		if err != nil {
			return err
		}
		if out, err = scanSQLiteClaimed(rows, c.Fair && !suspect); err != nil {
			return err
		}
		if len(out) > 0 {
			ids := make([]int64, len(out))
			for i, j := range out {
				ids[i] = j.ID
			}
			if _, err := tx.ExecContext(ctx, sqliteStartsSQL, sqliteTime(t), jsonIDs(ids)); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, sqliteForgetStartsSQL, sqliteTime(t)); err != nil {
				return err
			}
		}
		return tx.Commit()
	})
	return out, err
}

func (c sqliteConn) ClaimSuspectLimited(ctx context.Context, queues []string, cl Claim) ([]Claimed, error) {
	cl.N = 1
	return c.s.claimLimited(ctx, cl, true, queues)
}

func (c sqliteConn) Holds(ctx context.Context) (paused []string, limits []Limit, err error) {
	return scanHolds(c.s.db.QueryContext(ctx, holdsSQL))
}

func (s *sqlite) SetLimit(ctx context.Context, db *gorm.DB, l Limit) (wrote bool, err error) {
	err = s.Tx(ctx, db, func(tx *gorm.DB) error {
		wrote, err = setLimit(ctx, tx, l, sqliteTime(now()))
		return err
	})
	return wrote, err
}

func (s *sqlite) RemoveLimit(ctx context.Context, db *gorm.DB, scope, target string) error {
	return s.Tx(ctx, db, func(tx *gorm.DB) error { return removeLimit(ctx, tx, scope, target) })
}

func (s *sqlite) Limits(ctx context.Context, db *gorm.DB) ([]LimitUse, error) {
	return readLimitUse(ctx, db, limitUseSQL(sqliteAgo), sqliteTime(now()))
}

// prepared returns query prepared once for the store, for the statements
// whose preparing costs more than running them: the limited claims, whose
// many WITH items took SQLite longer to plan than to run.
func (s *sqlite) prepared(ctx context.Context, query string) (*sql.Stmt, error) {
	s.stmtsMu.Lock()
	defer s.stmtsMu.Unlock()
	if stmt := s.stmts[query]; stmt != nil {
		return stmt, nil
	}
	stmt, err := s.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if s.stmts == nil {
		s.stmts = map[string]*sql.Stmt{}
	}
	s.stmts[query] = stmt
	return stmt, nil
}
