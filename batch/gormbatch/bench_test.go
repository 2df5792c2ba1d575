package gormbatch_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/batch/gormbatch"
	"github.com/sheaf-dev/sheaf/internal/pgtest"
)

// The benchmarks write the same 1,000,000 rows per op into the same table,
// four ways: through the coordinator with a Table (gorm path and COPY path),
// and with plain gorm CreateInBatches and plain pgx CopyFrom as baselines.
// Each reports rows/s. Run them as interleaved rounds (see the README):
//
//	go test -c -o /tmp/gormbatch.test ./batch/gormbatch
//	for i in $(seq 7); do /tmp/gormbatch.test -test.run '^$' -test.bench . -test.benchtime 1x; done
//
// The comparison with the baselines uses one batch ID (ids=1): the whole
// million is one batch, its 200 sub-batches run one after another on one
// connection, as the baselines do, so the ratio measures the engine's and the
// Table's overhead (one transaction per sub-batch included), not parallelism.
// ids=4 splits the same rows into four batch IDs that run on four workers at
// once: what parallel batches buy on this machine.

const (
	benchRows  = 1_000_000
	benchChunk = 5000 // CreateInBatches' batch size, the engine's default sub-batch, and SendMany's slice
)

// benchRow is the row shape of the issue: batch_id text, seq int, a payload of
// about 100 bytes, created_at timestamptz.
type benchRow struct {
	BatchID   string
	Seq       int
	Payload   string
	CreatedAt time.Time
}

func (benchRow) TableName() string { return "bench_rows" }

// benchData returns the rows of a layout with ids batch IDs, built once: 1024
// distinct payloads of 100 bytes, consecutive quarters (for ids=4) under one
// batch ID each.
var benchData = sync.OnceValues(func() ([]benchRow, []benchRow) {
	payloads := make([]string, 1024)
	for i := range payloads {
		payloads[i] = fmt.Sprintf("%04d:%s", i, strings.Repeat("payload-", 12))[:100]
	}
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	one, four := make([]benchRow, benchRows), make([]benchRow, benchRows)
	for i := range one {
		one[i] = benchRow{BatchID: "BENCH", Seq: i, Payload: payloads[i%len(payloads)], CreatedAt: at}
		four[i] = one[i]
		four[i].BatchID = fmt.Sprintf("BENCH-%d", i*4/benchRows)
	}
	return one, four
})

func rowsFor(ids int) []benchRow {
	one, four := benchData()
	if ids == 4 {
		return four
	}
	return one
}

// benchDB is a fresh schema with the bench table, and a pool with a
// connection for every worker and one more.
func benchDB(tb testing.TB) *pgtest.DB {
	tb.Helper()
	db := pgtest.New(tb)
	// No index, and no autovacuum to wake up in the middle of a round.
	if err := db.Gorm.Exec(`CREATE TABLE bench_rows (
		batch_id text NOT NULL, seq int NOT NULL, payload text NOT NULL, created_at timestamptz NOT NULL
	) WITH (autovacuum_enabled = false)`).Error; err != nil {
		tb.Fatal(err)
	}
	db.SQL.SetMaxOpenConns(batch.DefaultWorkers + 1)
	db.SQL.SetMaxIdleConns(batch.DefaultWorkers + 1)
	return db
}

// benchOps runs op b.N times on an empty table, timing op only, checks that
// every row arrived and reports rows/s.
func benchOps(b *testing.B, db *pgtest.DB, op func()) {
	b.Helper()
	for range b.N {
		b.StopTimer()
		if err := db.Gorm.Exec("TRUNCATE bench_rows").Error; err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		op()
		b.StopTimer()
		if n := db.Count(b, "SELECT count(*) FROM bench_rows"); n != benchRows {
			b.Fatalf("%d rows written, want %d", n, benchRows)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N)*benchRows/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkPersistGorm writes through a coordinator with a Table on the gorm
// path, under the engine's default options.
func BenchmarkPersistGorm(b *testing.B) { benchPersist(b) }

// BenchmarkPersistCopy is BenchmarkPersistGorm with WithCopy.
func BenchmarkPersistCopy(b *testing.B) { benchPersist(b, gormbatch.WithCopy()) }

func benchPersist(b *testing.B, opts ...gormbatch.Option) {
	for _, ids := range []int{1, 4} {
		b.Run(fmt.Sprintf("ids=%d", ids), func(b *testing.B) {
			db := benchDB(b)
			tbl, err := gormbatch.New[benchRow](db.Gorm, opts...)
			if err != nil {
				b.Fatal(err)
			}
			rows := rowsFor(ids)
			benchOps(b, db, func() { persist(b, tbl, rows) })
		})
	}
}

// persist sends rows, in slices of benchChunk, to a new coordinator, closes
// each batch when its last row is sent, and shuts down.
func persist(b *testing.B, tbl *gormbatch.Table[benchRow], rows []benchRow) {
	var failed atomic.Int64
	c, err := batch.NewCoordinator[benchRow](tbl, quiet(), batch.WithCleanup(tbl),
		batch.WithObserver(func(o batch.Outcome) {
			if o.Status != batch.Completed {
				failed.Add(1)
				b.Error(o.BatchID, o.Status, o.Err)
			}
		}))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(rows); i += benchChunk {
		chunk := rows[i:min(i+benchChunk, len(rows))]
		id := chunk[0].BatchID
		if err := c.SendMany(ctx, id, chunk); err != nil {
			b.Fatal(err)
		}
		if i+benchChunk >= len(rows) || rows[i+benchChunk].BatchID != id {
			if err := c.Send(ctx, batch.End[benchRow](id)); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := c.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	if failed.Load() > 0 {
		b.FailNow()
	}
}

// BenchmarkRawGormCreateInBatches is the gorm baseline: CreateInBatches with
// batches of 5000, which gorm runs in one transaction, on one connection.
func BenchmarkRawGormCreateInBatches(b *testing.B) {
	db := benchDB(b)
	rows := rowsFor(1)
	benchOps(b, db, func() {
		if err := db.Gorm.CreateInBatches(rows, benchChunk).Error; err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkRawCopyFrom is the COPY baseline: one pgx CopyFrom of every row,
// on a connection of the same pool.
func BenchmarkRawCopyFrom(b *testing.B) {
	db := benchDB(b)
	rows := rowsFor(1)
	benchOps(b, db, func() {
		if err := rawCopy(db.SQL, rows); err != nil {
			b.Fatal(err)
		}
	})
}

func rawCopy(db *sql.DB, rows []benchRow) error {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		_, err := dc.(*stdlib.Conn).Conn().CopyFrom(ctx, pgx.Identifier{"bench_rows"},
			[]string{"batch_id", "seq", "payload", "created_at"},
			pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
				r := &rows[i]
				return []any{r.BatchID, r.Seq, r.Payload, r.CreatedAt}, nil
			}))
		return err
	})
}
