package gormbatch_test

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/batch/gormbatch"
	"github.com/sheaf-dev/sheaf/internal/pgtest"
)

// The benchmarks write the same 1,000,000 rows per op into the same table,
// four ways: through the coordinator with a Table (gorm path and COPY path),
// and with plain gorm CreateInBatches and plain pgx CopyFrom as baselines.
// Each reports rows/s. Run them as interleaved rounds (see examples/BENCHMARKS.md):
//
//	go test -c -o /tmp/gormbatch.test ./batch/gormbatch
//	for i in $(seq 7); do /tmp/gormbatch.test -test.run '^$' -test.bench . -test.benchtime 1x; done
//
// The comparison with the baselines uses one batch ID (ids=1): the whole
// million is one batch, its 200 sub-batches run one after another on one
// connection, as the baselines do, so the ratio measures the engine's and the
// Table's overhead (one transaction per sub-batch included), not parallelism.
// ids=4 splits the same rows into four batch IDs that run on four workers at
// once: what parallel batches buy on this machine. ids=1,max=50000 is ids=1
// with sub-batches ten times larger: fewer, larger transactions. The
// PerSubBatch benchmarks commit every 5000 rows without the engine, which
// tells the cost of the engine from the cost of its transactions.

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

// benchPayloads are 1024 distinct payloads of 100 bytes.
var benchPayloads = sync.OnceValue(func() []string {
	p := make([]string, 1024)
	for i := range p {
		p[i] = fmt.Sprintf("%04d:%s", i, strings.Repeat("payload-", 12))[:100]
	}
	return p
})

// benchRowsOne holds the rows of the one-batch layout, which every benchmark
// but ids=4 writes; built once, outside the timer.
var benchRowsOne = sync.OnceValue(func() []benchRow { return newBenchRows(1) })

// rowsFor returns the rows of a layout with ids batch IDs: consecutive
// blocks of rows under one batch ID each. Only the one-batch layout is kept:
// a second million rows alive would make every garbage collection, in every
// benchmark, scan twice as much.
func rowsFor(ids int) []benchRow {
	if ids == 1 {
		return benchRowsOne()
	}
	return newBenchRows(ids)
}

func newBenchRows(ids int) []benchRow {
	payloads := benchPayloads()
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	names := make([]string, ids)
	for i := range names {
		names[i] = "BENCH"
		if ids > 1 {
			names[i] = fmt.Sprintf("BENCH-%d", i)
		}
	}
	rows := make([]benchRow, benchRows)
	for i := range rows {
		rows[i] = benchRow{BatchID: names[i*ids/benchRows], Seq: i, Payload: payloads[i%len(payloads)], CreatedAt: at}
	}
	return rows
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

// benchOps runs op b.N times, timing op only, and reports rows/s. Every op
// starts from the same state: an empty table, a fresh checkpoint (so that no
// op pays for the dirty pages of the one before), a collected heap. It checks
// that every row arrived.
func benchOps(b *testing.B, db *pgtest.DB, op func()) {
	b.Helper()
	b.StopTimer()
	b.ResetTimer() // setup is not measured
	for range b.N {
		if err := db.Gorm.Exec("TRUNCATE bench_rows").Error; err != nil {
			b.Fatal(err)
		}
		_ = db.Gorm.Exec("CHECKPOINT").Error // needs a superuser or pg_checkpoint; best effort
		runtime.GC()
		b.StartTimer()
		op()
		b.StopTimer()
		if n := db.Count(b, "SELECT count(*) FROM bench_rows"); n != benchRows {
			b.Fatalf("%d rows written, want %d", n, benchRows)
		}
	}
	b.ReportMetric(float64(b.N)*benchRows/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkPersistGorm writes through a coordinator with a Table on the gorm
// path, under the engine's default options.
func BenchmarkPersistGorm(b *testing.B) { benchPersist(b) }

// BenchmarkPersistCopy is BenchmarkPersistGorm with WithCopy.
func BenchmarkPersistCopy(b *testing.B) { benchPersist(b, gormbatch.WithCopy()) }

func benchPersist(b *testing.B, opts ...gormbatch.Option) {
	for _, layout := range []struct {
		ids, maxBatch int
	}{
		{1, batch.DefaultMaxBatchSize}, // the comparison with the baselines
		{4, batch.DefaultMaxBatchSize},
		{1, 10 * batch.DefaultMaxBatchSize}, // fewer, larger transactions
	} {
		name := fmt.Sprintf("ids=%d", layout.ids)
		if layout.maxBatch != batch.DefaultMaxBatchSize {
			name += fmt.Sprintf(",max=%d", layout.maxBatch)
		}
		b.Run(name, func(b *testing.B) {
			db := benchDB(b)
			tbl, err := gormbatch.New[benchRow](db.Gorm, opts...)
			if err != nil {
				b.Fatal(err)
			}
			rows := rowsFor(layout.ids)
			benchOps(b, db, func() { persist(b, tbl, rows, batch.WithMaxBatchSize(layout.maxBatch)) })
		})
	}
}

// persist sends rows, in slices of benchChunk, to a new coordinator, closes
// each batch when its last row is sent, and shuts down.
func persist(b *testing.B, tbl *gormbatch.Table[benchRow], rows []benchRow, opts ...batch.Option) {
	var failed atomic.Int64
	c, err := batch.NewCoordinator[benchRow](tbl, append([]batch.Option{quiet(), batch.WithCleanup(tbl),
		batch.WithObserver(func(o batch.Outcome) {
			if o.Status != batch.Completed {
				failed.Add(1)
				b.Error(o.BatchID, o.Status, o.Err)
			}
		})}, opts...)...)
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
		err := withPgx(db.SQL, func(c *pgx.Conn) error {
			_, err := c.CopyFrom(context.Background(), pgx.Identifier{"bench_rows"}, benchColumns, copySource(rows))
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkRawGormPerSubBatch is not a baseline of the issue but the
// yardstick that tells the engine's cost from the cost of its transactions:
// plain gorm, no coordinator, one transaction per 5000 rows, as
// BenchmarkPersistGorm/ids=1 commits them.
func BenchmarkRawGormPerSubBatch(b *testing.B) {
	db := benchDB(b)
	rows := rowsFor(1)
	benchOps(b, db, func() {
		for chunk := range slices.Chunk(rows, benchChunk) {
			if err := db.Gorm.Transaction(func(tx *gorm.DB) error { return tx.Create(&chunk).Error }); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRawCopyFromPerSubBatch is BenchmarkRawGormPerSubBatch for COPY:
// BEGIN, pgx CopyFrom of 5000 rows, COMMIT, on one connection.
func BenchmarkRawCopyFromPerSubBatch(b *testing.B) {
	db := benchDB(b)
	rows := rowsFor(1)
	benchOps(b, db, func() {
		err := withPgx(db.SQL, func(c *pgx.Conn) error {
			for chunk := range slices.Chunk(rows, benchChunk) {
				err := pgx.BeginFunc(context.Background(), c, func(tx pgx.Tx) error {
					_, err := tx.CopyFrom(context.Background(), pgx.Identifier{"bench_rows"}, benchColumns, copySource(chunk))
					return err
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	})
}

var benchColumns = []string{"batch_id", "seq", "payload", "created_at"}

func copySource(rows []benchRow) pgx.CopyFromSource {
	return pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
		r := &rows[i]
		return []any{r.BatchID, r.Seq, r.Payload, r.CreatedAt}, nil
	})
}

// withPgx runs f on the pgx connection under one of db's connections.
func withPgx(db *sql.DB, f func(*pgx.Conn) error) error {
	conn, err := db.Conn(context.Background())
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error { return f(dc.(*stdlib.Conn).Conn()) })
}
