package queuetest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/queuetest"
	"github.com/sheaf-dev/sheaf/queue/sqlitedb"
)

// ReportArgs is the examples' kind.
type ReportArgs struct {
	County string
	Rows   int
}

func (ReportArgs) Kind() string { return "county_report" }

// writeReport is the handler under test: it reports its progress every
// 100 rows, stops when its job is cancelled, and leaves its row count for
// the jobs that depend on it. It refuses requesters without a role.
func writeReport(ctx context.Context, j *queue.Job[ReportArgs]) error {
	if j.Auth["role"] == nil {
		return queue.Permanent(errors.New("no role"))
	}
	for done := 100; done <= j.Args.Rows; done += 100 {
		if err := j.SetProgress(ctx, int64(done), int64(j.Args.Rows)); err != nil {
			return err
		}
		if err := context.Cause(ctx); err != nil {
			return err
		}
	}
	return j.SetOutput(ctx, map[string]int{"rows": j.Args.Rows})
}

// A handler runs against a job built in memory; its progress and output
// are recorded.
func ExampleAttempt() {
	a := queuetest.NewAttempt(ReportArgs{County: "Travis", Rows: 300})
	a.Job.Auth = queue.Auth{"role": "SUPERVISOR"}
	err := a.Run(context.Background(), queue.HandlerFunc[ReportArgs](writeReport))
	processed, total := a.Progress()
	fmt.Println(err, processed, total, string(a.Output()))
	// Output: <nil> 300 300 {"rows":300}
}

// Cancel cancels the job as Client.Cancel would; OnProgress lets the test
// do it at a known point.
func ExampleAttempt_Cancel() {
	a := queuetest.NewAttempt(ReportArgs{County: "Travis", Rows: 1000})
	a.Job.Auth = queue.Auth{"role": "ADMIN"}
	a.OnProgress = func(processed, _ int64) {
		if processed == 200 {
			a.Cancel()
		}
	}
	err := a.Run(context.Background(), queue.HandlerFunc[ReportArgs](writeReport))
	processed, _ := a.Progress()
	fmt.Println(err, processed, a.Cause() == queue.ErrCancelled)
	// Output: queue: job cancelled 200 true
}

// A handler that outlives its kind's Timeout finds its context ended with
// cause ErrTimeout.
func ExampleAttempt_timeout() {
	a := queuetest.NewAttempt(ReportArgs{County: "Travis"})
	a.Timeout = time.Millisecond
	err := a.Run(context.Background(), queue.HandlerFunc[ReportArgs](func(ctx context.Context, _ *queue.Job[ReportArgs]) error {
		<-ctx.Done()
		return context.Cause(ctx)
	}))
	fmt.Println(err)
	// Output: queue: job timed out
}

// open opens a queue on a new SQLite file, as a test would (or on the
// test's PostgreSQL schema), and returns it with a function that removes
// it.
func open(reg *queue.Registry, opts ...queue.ClientOption) (*queue.Client, *gorm.DB, func()) {
	dir, err := os.MkdirTemp("", "queuetest")
	if err != nil {
		log.Fatal(err)
	}
	db, err := sqlitedb.Open(filepath.Join(dir, "jobs.db"))
	if err != nil {
		log.Fatal(err)
	}
	c, err := queue.NewClient(db, reg, opts...)
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Migrate(context.Background()); err != nil {
		log.Fatal(err)
	}
	return c, db, func() {
		sqlDB, _ := db.DB()
		sqlDB.Close()
		os.RemoveAll(dir)
	}
}

// registry registers writeReport.
func registry() *queue.Registry {
	reg := queue.NewRegistry()
	if err := queue.Register(reg, queue.HandlerFunc[ReportArgs](writeReport), queue.OnQueue("reports")); err != nil {
		log.Fatal(err)
	}
	return reg
}

// exampleT stands for the test's *testing.T in these examples.
type exampleT struct{ testing.TB }

func (exampleT) Helper() {}
func (exampleT) Fatalf(format string, args ...any) {
	log.Fatalf(format, args...)
}

// RequireEnqueued checks what code enqueued, inside a transaction too:
// given the transaction's TxClient, it sees the jobs before the commit.
func ExampleRequireEnqueued() {
	client, db, done := open(registry())
	defer done()
	t := exampleT{} // a test's t
	err := db.Transaction(func(tx *gorm.DB) error {
		txc := client.Tx(tx)
		if _, err := txc.Enqueue(context.Background(), ReportArgs{County: "Travis", Rows: 10}, queue.Priority(8), queue.IdempotencyKey("travis-2025-12-08")); err != nil {
			return err
		}
		job := queuetest.RequireEnqueued(t, txc, ReportArgs{County: "Travis", Rows: 10},
			queuetest.Want{Queue: "reports", Priority: 8, IdempotencyKey: "travis-2025-12-08", Status: queue.StatusQueued})
		fmt.Println("in the transaction:", job.Kind, job.Queue, job.Priority)
		return errors.New("roll back")
	})
	fmt.Println(err)
	queuetest.RequireNotEnqueued[ReportArgs](t, client)
	fmt.Println("after the rollback: none")
	// Output:
	// in the transaction: county_report reports 8
	// roll back
	// after the rollback: none
}

// WorkDue works the jobs a test enqueued and returns once none is due.
func ExampleWorkDue() {
	client, _, done := open(registry())
	defer done()
	ctx := context.Background()
	for _, county := range []string{"Travis", "Harris"} {
		if _, err := client.Enqueue(ctx, ReportArgs{County: county, Rows: 200}, queue.AuthContext(queue.Auth{"role": "ADMIN"})); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := client.Enqueue(ctx, ReportArgs{County: "Bexar"}); err != nil { // no role: fails for good
		log.Fatal(err)
	}
	stats, err := queuetest.WorkDue(ctx, client, queue.WithQueues("reports"))
	fmt.Println(err, "completed", stats.Completed, "failed", stats.Failed)
	// Output: <nil> completed 2 failed 1
}

// Clock puts a runner's schedules at any time, and stands still until the
// test moves it: here to the 23:00 tick, once the runner waits for it.
func ExampleClock() {
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		log.Fatal(err)
	}
	reg := queue.NewRegistry()
	ran := make(chan *queue.Job[ReportArgs], 1)
	if err := queue.Register(reg, queue.HandlerFunc[ReportArgs](func(_ context.Context, j *queue.Job[ReportArgs]) error {
		ran <- j
		return nil
	})); err != nil {
		log.Fatal(err)
	}
	if err := reg.Schedule(queue.Periodic{
		Name: "nightly", Spec: queue.Daily(23, 0), Location: kolkata,
		Jobs: func(queue.Tick) []queue.Params { return []queue.Params{{Args: ReportArgs{County: "Travis"}}} },
	}); err != nil {
		log.Fatal(err)
	}
	clock := queuetest.NewClock(time.Date(2025, 12, 8, 22, 0, 0, 0, kolkata))
	client, _, done := open(reg, queue.WithClock(clock))
	defer done()
	ctx := context.Background()
	runner, err := queue.NewRunner(client)
	if err != nil {
		log.Fatal(err)
	}
	if err := runner.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer runner.Stop(ctx)
	<-clock.Waiting(1)
	queuetest.RequireNotEnqueued[ReportArgs](exampleT{}, client)
	clock.Set(time.Date(2025, 12, 8, 23, 0, 0, 0, kolkata))
	j := <-ran
	fmt.Println(j.Args.County, j.RunID)
	// Output: Travis nightly@2025-12-08T23:00:00+05:30
}

// NewJob builds a job as a runner hands it to a handler; a handler can be
// called with it directly when the test needs nothing recorded.
func ExampleNewJob() {
	j := queuetest.NewJob(ReportArgs{County: "Travis"})
	fmt.Println(j.Kind, j.Queue, j.Attempt, "of", j.MaxAttempts)
	fmt.Println(writeReport(context.Background(), j)) // no role in j.Auth
	// Output:
	// county_report default 1 of 3
	// permanent: no role
}

// ListEnqueued returns a kind's jobs with their args decoded, for checks
// of one's own.
func ExampleListEnqueued() {
	client, _, done := open(registry())
	defer done()
	ctx := context.Background()
	for _, county := range []string{"Travis", "Harris"} {
		if _, err := client.Enqueue(ctx, ReportArgs{County: county}); err != nil {
			log.Fatal(err)
		}
	}
	jobs, err := queuetest.ListEnqueued[ReportArgs](ctx, client)
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range jobs {
		fmt.Println(j.Job.ID, j.Args.County, j.Job.Status)
	}
	// Output:
	// 1 Travis QUEUED
	// 2 Harris QUEUED
}
