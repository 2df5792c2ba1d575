package gormbatch_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/batch/gormbatch"
)

// A Table is the coordinator's processor and its cleanup strategy. This
// example needs a PostgreSQL server, so it is compiled but not run; the
// program in examples/orders runs the same thing.
func Example() {
	type LineItem struct {
		ID        int64 `gorm:"primaryKey"`
		BatchID   string
		SKU       string
		Cents     int64
		CreatedAt time.Time
	}

	db, err := gorm.Open(postgres.Open("postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), &gorm.Config{})
	if err != nil {
		log.Fatal(err)
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	sqlDB.SetMaxOpenConns(batch.DefaultWorkers + 2) // a connection per worker, and some for the program
	sqlDB.SetMaxIdleConns(batch.DefaultWorkers + 2)

	lines, err := gormbatch.New[LineItem](db, gormbatch.WithCopy())
	if err != nil {
		log.Fatal(err)
	}
	c, err := batch.NewCoordinator[LineItem](lines,
		batch.WithCleanup(lines),
		batch.WithBufferReuse(true), // a Table keeps no reference to the items
		batch.WithObserver(func(o batch.Outcome) {
			fmt.Println(o.BatchID, o.Status, o.Items, o.Err, o.CleanupErr)
		}))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	_ = c.SendMany(ctx, "INVOICE-2026-0001", []LineItem{{SKU: "A-1", Cents: 1200}, {SKU: "B-7", Cents: 300}})
	_ = c.Send(ctx, batch.End[LineItem]("INVOICE-2026-0001"))
	if err := c.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
}
