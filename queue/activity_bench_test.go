package queue_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
)

// activityJobs is how many jobs BenchmarkActivity seeds: few by default,
// so that CI's -benchtime 1x stays quick; SHEAF_BENCH_ACTIVITY_JOBS=1000000
// measures the dashboard's case.
var activityJobs = envInt("SHEAF_BENCH_ACTIVITY_JOBS", 20000)

// BenchmarkActivity seeds activityJobs jobs finished over the last seven
// days, in twelve kinds and two queues (94% COMPLETED, 5% FAILED after
// three attempts, each in the attempt history, 1% CANCELLED; waits up to
// 30 s, runs up to 5 s), and times Activity for the dashboard's charts: the
// last hour in minutes and the last day in quarter hours, reporting the
// median call (p50_ms).
func BenchmarkActivity(b *testing.B) {
	e := newEnvB(b, func(*queue.Registry) {})
	seed := seedActivityPG
	if pgtest.Store() == "sqlite" {
		seed = seedActivitySQLite
	}
	for _, q := range seed {
		var args []any
		if strings.Contains(q, "$1") || strings.Contains(q, "?1") {
			args = []any{activityJobs}
		}
		if err := e.db.Gorm.Exec(q, args...).Error; err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name         string
		span, bucket time.Duration
	}{{"hour", time.Hour, time.Minute}, {"day", 24 * time.Hour, 15 * time.Minute}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				t0 := time.Now()
				got, err := e.client.Activity(ctx, queue.ActivityQuery{Since: time.Now().Add(-c.span), Bucket: c.bucket})
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				if len(got) == 0 {
					b.Fatal("no buckets")
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2])/float64(time.Millisecond), "p50_ms")
		})
	}
}

// seedActivityPG seeds BenchmarkActivity's jobs ($1 of them) on PostgreSQL.
var seedActivityPG = []string{`SELECT setseed(0.42)`, `
INSERT INTO sheaf_jobs (kind, queue, status, run_at, created_at, started_at, completed_at, attempts, claims, last_error)
SELECT 'kind' || (i % 12), CASE WHEN i % 5 = 0 THEN 'critical' ELSE 'default' END,
	CASE WHEN i % 20 = 7 THEN 'FAILED' WHEN i % 100 = 3 THEN 'CANCELLED' ELSE 'COMPLETED' END,
	t, t, t + w, t + w + r, 1, 1, CASE WHEN i % 20 = 7 THEN 'boom' END
FROM (SELECT i, now() - interval '7 days' + i * interval '7 days' / $1 AS t,
	random() ^ 3 * interval '30 seconds' AS w, random() ^ 2 * interval '5 seconds' AS r
	FROM generate_series(1, $1) i) g`, `
INSERT INTO sheaf_attempts (job_id, claim, runner, started_at, finished_at, outcome, error)
SELECT id, c, 'runner', started_at - (3 - c) * interval '40 seconds', completed_at - (3 - c) * interval '40 seconds',
	CASE WHEN c = 3 THEN 'failed' ELSE 'retried' END, 'boom'
FROM sheaf_jobs, generate_series(1, 3) c WHERE status = 'FAILED'`,
	`VACUUM ANALYZE sheaf_jobs, sheaf_attempts`}

// seedActivitySQLite is seedActivityPG on SQLite, times in its layout.
var seedActivitySQLite = []string{`
INSERT INTO sheaf_jobs (kind, queue, status, run_at, created_at, started_at, completed_at, attempts, claims, last_error)
WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?1),
u AS MATERIALIZED (SELECT i, (abs(random()) % 1000000) / 1e6 AS a, (abs(random()) % 1000000) / 1e6 AS c FROM g),
s AS (SELECT i, unixepoch('now', '-7 days') + i * 604800.0 / ?1 AS t, a * a * a * 30 AS w, c * c * 5 AS r FROM u)
SELECT 'kind' || (i % 12), CASE WHEN i % 5 = 0 THEN 'critical' ELSE 'default' END,
	CASE WHEN i % 20 = 7 THEN 'FAILED' WHEN i % 100 = 3 THEN 'CANCELLED' ELSE 'COMPLETED' END,
	strftime('%Y-%m-%d %H:%M:%f000000+00:00', t, 'unixepoch'), strftime('%Y-%m-%d %H:%M:%f000000+00:00', t, 'unixepoch'),
	strftime('%Y-%m-%d %H:%M:%f000000+00:00', t + w, 'unixepoch'), strftime('%Y-%m-%d %H:%M:%f000000+00:00', t + w + r, 'unixepoch'),
	1, 1, CASE WHEN i % 20 = 7 THEN 'boom' END
FROM s`, `
INSERT INTO sheaf_attempts (job_id, claim, runner, started_at, finished_at, outcome, error)
SELECT id, c.value, 'runner', strftime('%Y-%m-%d %H:%M:%f000000+00:00', started_at, ((c.value - 3) * 40) || ' seconds'),
	strftime('%Y-%m-%d %H:%M:%f000000+00:00', completed_at, ((c.value - 3) * 40) || ' seconds'),
	CASE WHEN c.value = 3 THEN 'failed' ELSE 'retried' END, 'boom'
FROM sheaf_jobs, (SELECT 1 AS value UNION ALL SELECT 2 UNION ALL SELECT 3) c WHERE status = 'FAILED'`, `ANALYZE`}
