package store

import (
	"context"
	"database/sql"
	"fmt"

	"gorm.io/gorm"
)

// An attempt's own writes, each guarded like a result: it changes the job
// only while the attempt's claim holds it, and reports false when it did
// not.

// SetProgress saves a running job's progress.
func (s *postgres) SetProgress(ctx context.Context, id int64, claims int, processed, total int64) (bool, error) {
	return update(ctx, s.db, id, claims, "processed = $1, total = $2", processed, total)
}

// SetChunkProgress saves a chunked job's progress with its chunk times
// (see runner.ChunkTimes; "" for none), in the one statement.
func (s *postgres) SetChunkProgress(ctx context.Context, id int64, claims int, processed, total int64, times string) (bool, error) {
	return update(ctx, s.db, id, claims, "processed = $1, total = $2, chunk_times = $3", processed, total, nullText(times))
}

// nullText is s, or NULL for "".
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// ChunkTimes reads the chunk times a chunked job's latest attempt saved
// ("" for none), the same on every store; found is false for no such job.
func ChunkTimes(ctx context.Context, db *gorm.DB, id int64) (times string, found bool, err error) {
	var rows []struct{ ChunkTimes *string }
	if err := db.WithContext(ctx).Raw("SELECT chunk_times FROM sheaf_jobs WHERE id = ?", id).Scan(&rows).Error; err != nil || len(rows) == 0 {
		return "", false, err
	}
	if rows[0].ChunkTimes != nil {
		times = *rows[0].ChunkTimes
	}
	return times, true, nil
}

// SetOutput saves a running job's output, JSON.
func (s *postgres) SetOutput(ctx context.Context, id int64, claims int, output string) (bool, error) {
	return update(ctx, s.db, id, claims, "output = $1::jsonb", output)
}

// update sets columns of job id while claim claims holds it. set uses
// $1, $2, ... for args.
func update(ctx context.Context, db *sql.DB, id int64, claims int, set string, args ...any) (bool, error) {
	n := len(args)
	query := fmt.Sprintf("UPDATE sheaf_jobs SET %s WHERE id = $%d AND "+
		"claims = $%d AND status = 'PROCESSING'", set, n+1, n+2)
	res, err := db.ExecContext(ctx, query, append(args, id, claims)...)
	if err != nil {
		return false, err
	}
	changed, err := res.RowsAffected()
	return changed > 0, err
}

// State reads a job's status and claim number as the database has them.
func (s *postgres) State(ctx context.Context, id int64) (status string, claims int, err error) {
	return stateIn(s.gdb.WithContext(ctx), id)
}
