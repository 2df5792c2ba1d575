package store_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// errRollback rolls a test's transaction back.
var errRollback = errors.New("roll back")

// A completion of thousands of results reaches each job through the
// primary key and finds each claim's key in a hash table, whichever plan
// the server uses, generic (as for a statement pgx has prepared and run
// more than five times) or custom: compared with = ANY, a generic plan
// searched the whole array of keys for every row.
func TestCompletionLooksKeysUpInAHashTable(t *testing.T) {
	t.Parallel()
	_, db := migratedPostgres(t)
	require.NoError(t, db.Exec(`INSERT INTO sheaf_jobs (kind, status, claims) SELECT 'a', 'QUEUED', 0 FROM generate_series(1, 200000)`).Error)
	require.NoError(t, db.Exec("ANALYZE sheaf_jobs").Error)
	var ids []int64
	require.NoError(t, db.Raw(`UPDATE sheaf_jobs SET status = 'PROCESSING', claims = 1 WHERE id IN
		(SELECT id FROM sheaf_jobs ORDER BY id LIMIT 2000) RETURNING id`).Scan(&ids).Error)
	keys := make([]int64, len(ids))
	for i, id := range ids {
		keys[i] = store.Key(id, 1)
	}
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		t.Run(mode, func(t *testing.T) {
			var plan string
			err := db.Transaction(func(tx *gorm.DB) error {
				require.NoError(t, tx.Exec("SET LOCAL plan_cache_mode = "+mode).Error)
				require.NoError(t, tx.Raw("EXPLAIN (ANALYZE, FORMAT JSON) "+store.CompleteSQL, store.IDListValue(ids), store.IDListValue(keys)).
					Row().Scan(&plan))
				return errRollback
			})
			require.ErrorIs(t, err, errRollback)
			var nodes []struct{ Plan planNode }
			require.NoError(t, json.Unmarshal([]byte(plan), &nodes))
			shape := nodes[0].Plan.shape()
			require.Equal(t, 2000.0, nodes[0].Plan.Rows, "jobs completed: %s", shape)
			require.Equal(t, 2000.0, nodes[0].Plan.Plans[0].read("sheaf_jobs"), "rows of sheaf_jobs read: %s", shape)
			require.Contains(t, plan, "hashed SubPlan", "the keys in a hash table: %s", shape)
			require.NotContains(t, shape, "Seq Scan", "the jobs through their key")
			require.NotContains(t, shape, "Join", "no join with the keys")
		})
	}
}
