package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// MySQLLoads is how many of st's Copy calls LOAD DATA stored, if st is the
// MariaDB store.
func MySQLLoads(st Store) int64 {
	if s, ok := st.(*mysql); ok {
		return s.loads.Load()
	}
	return 0
}

// MigrationLock is the statement that takes the lock Migrate holds on
// PostgreSQL.
const MigrationLock = migrationLock

// SQLiteCopyRows is how many jobs one INSERT of the SQLite store's Copy
// writes.
const SQLiteCopyRows = copyRows

// PruneCandidates returns the statement, and its arguments, with which a
// batch on st reads the candidates of kinds due under rules from place
// from until end.
func PruneCandidates(st Store, rules []KeepRule, kinds []string, from Place, end time.Time, limit int) (q string, args []any) {
	return keepingOf(st).candidatesSQL(Prune{Rules: rules, Kinds: kinds}, from, end, limit)
}

// MySQLBatches reports whether st, the MariaDB store, sends several
// statements in one call, and whether its transactions leave their
// isolation to the session's.
func MySQLBatches(st Store) (multi, sessionIsolation bool) {
	s := st.(*mysql)
	return s.multi, s.txOpts == nil
}

// CompleteSQL is the statement that completes claims ($1 job IDs, $2 claim
// keys) on PostgreSQL.
var CompleteSQL = completeSQL

// PruneRunVerdict is what run's row in sheaf_runs tells a batch on st
// under rules, read on db: "open" (a job is not due), "due" (every job is)
// or "unknown" (the jobs must be read).
func PruneRunVerdict(st Store, db *gorm.DB, run string, rules []KeepRule) (string, error) {
	v, err := keepingOf(st).runVerdict(db, run, rules)
	return [...]string{runUnknown: "unknown", runOpen: "open", runDue: "due"}[v], err
}

// PrunePeriodBlocked is whether a batch on st under rules, read on db,
// keeps period's jobs: one of them is not due.
func PrunePeriodBlocked(st Store, db *gorm.DB, period string, rules []KeepRule) (bool, error) {
	blocked, err := keepingOf(st).blocked(db, "period", map[string]bool{period: true}, rules)
	return blocked[period], err
}

// KeptSlow returns the basis of what was kept of run, and the page of slow
// jobs kept against it, as CountKindStatus reads them.
func KeptSlow(ctx context.Context, db *gorm.DB, run string) (string, *RunSlow, error) {
	kept, err := keptRun(ctx, db, run)
	if err != nil || kept == nil {
		return "", nil, err
	}
	return kept.Basis, kept.Slow, nil
}
