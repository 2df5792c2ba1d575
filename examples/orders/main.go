// Command orders persists interleaved batches of orders into PostgreSQL with
// sheaf's batch engine and package gormbatch. One batch holds an order that
// violates a CHECK constraint in its third sub-batch: that sub-batch is rolled
// back, the two before it are deleted by the cleanup, and the batch leaves no
// row. The program prints each batch's outcome next to the row count it reads
// back with SQL, and exits non-zero if a batch is not all-or-nothing.
//
//	go run ./examples/orders [-dsn URL] [-copy] [-max-batch 1000] [-workers 4] [-keep]
//
// It works in a schema of its own, sheaf_example_orders, which it drops and
// recreates at start and drops at the end (unless -keep).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/batch/gormbatch"
)

const (
	defaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	schema     = "sheaf_example_orders"
)

// Order is one order line. BatchID is left empty by the producers:
// gormbatch fills it with the batch ID the order was sent with.
type Order struct {
	ID        int64 `gorm:"primaryKey"`
	BatchID   string
	OrderNo   int
	Customer  string
	Cents     int64
	CreatedAt time.Time
}

const ddl = `
CREATE TABLE orders (
	id         bigserial PRIMARY KEY,
	batch_id   text NOT NULL,
	order_no   int NOT NULL,
	customer   text NOT NULL,
	cents      bigint NOT NULL CONSTRAINT orders_cents_positive CHECK (cents > 0),
	created_at timestamptz NOT NULL
);
CREATE INDEX orders_batch_id ON orders (batch_id); -- what the cleanup deletes by
`

// plan is the day's batches. One producer per batch sends at the same time
// as the others, so their orders interleave.
var plan = []struct {
	id     string
	orders int
	bad    func(maxBatch int) int // index of an order with cents 0, or -1
}{
	{"EU-2026-11-22", 12_000, nil},
	{"US-2026-11-22", 7_500, nil},
	{"APAC-2026-11-22", 3_200, nil},
	{"REFUNDS-2026-11-22", 4_500, func(maxBatch int) int { return 2*maxBatch + 17 }}, // in sub-batch 3
	{"LATAM-2026-11-22", 999, nil},
}

func main() {
	dsn := flag.String("dsn", "", "PostgreSQL URL (default $DATABASE_URL, else "+defaultDSN+")")
	useCopy := flag.Bool("copy", false, "write with COPY instead of gorm's INSERT")
	maxBatch := flag.Int("max-batch", 1000, "largest sub-batch")
	workers := flag.Int("workers", batch.DefaultWorkers, "batches written at once")
	keep := flag.Bool("keep", false, "keep the schema "+schema+" for inspection")
	flag.Parse()
	if *dsn == "" {
		*dsn = os.Getenv("DATABASE_URL")
	}
	if *dsn == "" {
		*dsn = defaultDSN
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *dsn, *useCopy, *maxBatch, *workers, *keep); err != nil {
		log.Fatal("orders: ", err)
	}
}

func run(ctx context.Context, dsn string, useCopy bool, maxBatch, workers int, keep bool) (err error) {
	db, err := open(ctx, dsn, workers)
	if err != nil {
		return err
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	defer func() {
		if keep {
			fmt.Printf("\nleft schema %s in place (-keep)\n", schema)
			return
		}
		if dropErr := db.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE").Error; dropErr != nil {
			err = errors.Join(err, fmt.Errorf("drop schema %s: %w", schema, dropErr))
		}
	}()

	var opts []gormbatch.Option
	path := "gorm INSERT"
	if useCopy {
		opts, path = append(opts, gormbatch.WithCopy()), "COPY"
	}
	orders, err := gormbatch.New[Order](db, opts...)
	if err != nil {
		return err
	}
	var (
		mu       sync.Mutex
		outcomes []batch.Outcome
	)
	c, err := batch.NewCoordinator[Order](orders,
		batch.WithCleanup(orders),
		batch.WithMaxBatchSize(maxBatch),
		batch.WithWorkers(workers),
		batch.WithBufferReuse(true), // gormbatch keeps no reference to the items
		// The table below reports failures; the engine's own log would
		// repeat them.
		batch.WithLogger(slog.New(slog.DiscardHandler)),
		batch.WithObserver(func(o batch.Outcome) {
			mu.Lock()
			defer mu.Unlock()
			outcomes = append(outcomes, o)
		}))
	if err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	fmt.Printf("writing %d interleaved batches to %s.orders with %s: max batch size %d, %d workers\n",
		len(plan), schema, path, maxBatch, workers)

	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(plan))
	for _, p := range plan {
		wg.Go(func() { errs <- produce(ctx, c, p.id, p.orders, p.bad, maxBatch) })
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		err = errors.Join(err, e)
	}
	if shutdownErr := c.Shutdown(ctx); shutdownErr != nil {
		return errors.Join(err, shutdownErr)
	}
	if err != nil {
		return err
	}
	elapsed := time.Since(start)

	rows, err := countRows(db)
	if err != nil {
		return err
	}
	return report(outcomes, rows, elapsed)
}

// open connects with search_path set to the example's schema, which it
// recreates, and sizes the pool for the coordinator.
func open(ctx context.Context, dsn string, workers int) (*gorm.DB, error) {
	config, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	config.RuntimeParams["search_path"] = schema
	sqlDB := stdlib.OpenDB(*config)
	sqlDB.SetMaxOpenConns(workers + 1) // a connection per worker, one for the program
	sqlDB.SetMaxIdleConns(workers + 1)
	db, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), &gorm.Config{Logger: logger.Discard})
	if err == nil {
		err = db.WithContext(ctx).Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " + schema + ";" + ddl).Error
	}
	if err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("prepare schema %s: %w", schema, err)
	}
	return db, nil
}

// produce sends n orders for batch id, one at a time, then the end of the
// batch.
func produce(ctx context.Context, c *batch.Coordinator[Order], id string, n int, bad func(int) int, maxBatch int) error {
	badAt := -1
	if bad != nil {
		badAt = min(bad(maxBatch), n-1) // with a large -max-batch, the last order: the batch still fails
	}
	for i := range n {
		o := Order{OrderNo: i + 1, Customer: fmt.Sprintf("C%05d", i%977), Cents: int64(500 + i%10_000)}
		if i == badAt {
			o.Cents = 0 // violates orders_cents_positive
		}
		if err := c.Send(ctx, batch.Data(id, o)); err != nil {
			return fmt.Errorf("send %s: %w", id, err)
		}
	}
	return c.Send(ctx, batch.End[Order](id))
}

func countRows(db *gorm.DB) (map[string]int64, error) {
	var counts []struct {
		BatchID string
		N       int64
	}
	err := db.Raw("SELECT batch_id, count(*) AS n FROM orders GROUP BY batch_id").Scan(&counts).Error
	rows := map[string]int64{}
	for _, c := range counts {
		rows[c.BatchID] = c.N
	}
	return rows, err
}

// report prints the outcomes next to the rows read back, and returns an error
// if a batch is not all-or-nothing.
func report(outcomes []batch.Outcome, rows map[string]int64, elapsed time.Duration) error {
	slices.SortFunc(outcomes, func(a, b batch.Outcome) int { return strings.Compare(a.BatchID, b.BatchID) })
	fmt.Printf("\nall batches finished in %v\n\n", elapsed.Round(time.Millisecond))
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "BATCH\tSTATUS\tSUB-BATCHES\tITEMS\tROWS IN DB\tDETAIL")
	var problems []string
	for _, o := range outcomes {
		n := rows[o.BatchID]
		if (o.Status == batch.Completed && n != o.Items) || (o.Status != batch.Completed && n != 0) {
			problems = append(problems, fmt.Sprintf("%s is %s with %d rows", o.BatchID, o.Status, n))
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%s\n", o.BatchID, o.Status, o.SubBatches, o.Items, n, detail(o))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	var total int64
	for _, n := range rows {
		total += n
	}
	fmt.Printf("\n%d rows in orders, every one from a completed batch\n", total)
	if len(problems) > 0 {
		return fmt.Errorf("not all-or-nothing: %s", strings.Join(problems, "; "))
	}
	if len(outcomes) != len(plan) {
		return fmt.Errorf("%d outcomes for %d batches", len(outcomes), len(plan))
	}
	return nil
}

// detail explains a failure: the sub-batch, the constraint and what the
// cleanup did.
func detail(o batch.Outcome) string {
	if o.Err == nil {
		return ""
	}
	cause := o.Err.Error()
	var pg *pgconn.PgError
	if errors.As(o.Err, &pg) {
		cause = fmt.Sprintf("%s (SQLSTATE %s, constraint %s)", pg.Message, pg.Code, pg.ConstraintName)
	}
	cleaned := fmt.Sprintf("cleanup deleted the %d rows of sub-batches 1-%d", o.Items, o.SubBatches)
	switch {
	case o.CleanupErr != nil:
		cleaned = "cleanup failed: " + o.CleanupErr.Error()
	case o.SubBatches == 0:
		cleaned = "nothing had been written"
	}
	return fmt.Sprintf("sub-batch %d: %s; %s", o.Seq, cause, cleaned)
}
