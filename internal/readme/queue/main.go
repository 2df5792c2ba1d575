package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/sqlitedb"
)

// ReportArgs is a job's payload; its Kind names the handler that works it.
type ReportArgs struct{ County string }

func (ReportArgs) Kind() string { return "county_report" }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	db, err := sqlitedb.Open("jobs.db") // an SQLite file: no server to run
	if err != nil {
		log.Fatal(err)
	}

	reg := queue.NewRegistry()
	err = queue.Register(reg, queue.HandlerFunc[ReportArgs](func(ctx context.Context, j *queue.Job[ReportArgs]) error {
		fmt.Printf("report for %s (job %d, attempt %d)\n", j.Args.County, j.ID, j.Attempt)
		return nil // nil completes the job; an error retries it after a backoff
	}), queue.MaxAttempts(5))
	if err != nil {
		log.Fatal(err)
	}

	client, err := queue.NewClient(db, reg)
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Migrate(ctx); err != nil { // creates or upgrades the tables
		log.Fatal(err)
	}

	runner, err := queue.NewRunner(client, queue.WithWorkers(4))
	if err != nil {
		log.Fatal(err)
	}
	// Start's context lives as long as the runner; Stop, below, ends it.
	if err := runner.Start(context.Background()); err != nil {
		log.Fatal(err)
	}

	var ids []int64
	for _, county := range []string{"Travis", "Harris", "Dallas"} {
		res, err := client.Enqueue(ctx, ReportArgs{County: county}, queue.Priority(8))
		if err != nil {
			log.Fatal(err)
		}
		ids = append(ids, res.Job.ID)
	}
	jobs, err := client.Wait(ctx, ids...) // returns early, with an error, on Ctrl-C
	if err != nil {
		log.Print(err)
	}
	for _, j := range jobs {
		fmt.Println(j.ID, j.Status)
	}

	// At its deadline Stop cancels running jobs and puts them back, their
	// attempt uncounted: when it returns, no job is PROCESSING under it.
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := runner.Stop(stopCtx); err != nil {
		log.Print(err)
	}
}
