package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// BenchmarkPrune prunes finished jobs, a tenth of them in runs of ten, in
// batches of 1,000, from a table that also holds as many recent finished
// jobs (kept) and queued ones: jobs deleted per second, and the time of one
// batch, its transaction's length. Each seeding's jobs share a period, as
// a night's jobs do.
func BenchmarkPrune(b *testing.B) {
	for _, name := range []string{"postgres", "sqlite"} {
		b.Run(name, func(b *testing.B) {
			newDB := pgtest.NewSQLite
			if name == "postgres" {
				newDB = pgtest.New
			}
			db := newDB(b)
			st, err := store.Open(db.Gorm)
			require.NoError(b, err)
			ctx := context.Background()
			_, err = st.Migrate(ctx)
			require.NoError(b, err)
			const n = 20_000
			seed := func(at time.Time, status string) {
				jobs := make([]store.NewJob, n)
				period := at.Format(time.RFC3339Nano)
				for i := range jobs {
					jobs[i] = store.NewJob{Kind: "k", Queue: "q", Priority: 5, Attempts: 3, Payload: "{}", Period: &period}
					if i%10 == 0 {
						run := fmt.Sprintf("r%d-%d", at.UnixNano(), i/100)
						jobs[i].RunID = &run
					}
				}
				_, err := st.Copy(ctx, jobs)
				require.NoError(b, err)
				require.NoError(b, db.Gorm.Exec("UPDATE sheaf_jobs SET status = ?, started_at = ?, completed_at = ? WHERE status = 'QUEUED'",
					status, db.Time(at.Add(-time.Second)), db.Time(at)).Error)
				// As the maintenance leader does before it prunes.
				_, err = store.KeepRunCounts(ctx, st, db.Gorm, 1000)
				require.NoError(b, err)
			}
			now := time.Now()
			seed(now, "COMPLETED") // recent: kept
			rules := []store.KeepRule{{Status: "COMPLETED", Before: now.Add(-time.Hour)}}
			var batches, deleted int
			var elapsed time.Duration
			for b.Loop() {
				b.StopTimer()
				seed(now.Add(-48*time.Hour), "COMPLETED")
				b.StartTimer()
				start := time.Now()
				var after store.Place
				for {
					res, err := st.Prune(ctx, store.Prune{Rules: rules, After: after, Limit: 1000})
					require.NoError(b, err)
					batches++
					deleted += len(res.Deleted)
					if res.Done {
						break
					}
					after = res.Next
				}
				elapsed += time.Since(start)
			}
			require.Equal(b, n*b.N, deleted)
			b.ReportMetric(float64(deleted)/elapsed.Seconds(), "jobs/s")
			b.ReportMetric(float64(elapsed.Milliseconds())/float64(batches), "ms/batch")
		})
	}
}
