package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/queue"
)

// The examples' job kinds.

type CountyReport struct{ County string }

func (CountyReport) Kind() string { return "county_report" }

type CountySummary struct {
	County string
	Report int64 // the county report's job
}

func (CountySummary) Kind() string { return "county_summary" }

// connect stands for your program's gorm.Open, with the pool sized as the
// queue documentation's Connections section says:
//
//	db, err := gorm.Open(postgres.Open(dsn), &gorm.Config{})
//	sqlDB, _ := db.DB()
//	sqlDB.SetMaxOpenConns(20)
//	sqlDB.SetMaxIdleConns(20)
//
// Here each example gets a schema of its own on the test server, dropped
// when the tests end.
func connect() *gorm.DB {
	db, err := examples.Open()
	if err != nil {
		log.Fatal(err)
	}
	return db
}

// startOn builds a client on db, migrates its schema and starts a runner,
// as Example_runner shows step by step.
func startOn(ctx context.Context, db *gorm.DB, reg *queue.Registry) (*queue.Client, *queue.Runner) {
	client := clientOn(ctx, db, reg)
	runner, err := queue.NewRunner(client)
	if err != nil {
		log.Fatal(err)
	}
	if err := runner.Start(ctx); err != nil {
		log.Fatal(err)
	}
	return client, runner
}

// clientOn builds a client on db and migrates its schema.
func clientOn(ctx context.Context, db *gorm.DB, reg *queue.Registry) *queue.Client {
	client, err := queue.NewClient(db, reg)
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	return client
}

// reports is a registry whose county reports do nothing.
func reports() *queue.Registry {
	reg := queue.NewRegistry()
	if err := queue.Register(reg, queue.HandlerFunc[CountyReport](func(context.Context, *queue.Job[CountyReport]) error {
		return nil
	})); err != nil {
		log.Fatal(err)
	}
	return reg
}

// Enqueueing needs no runner: a job is a row, and an idempotency key makes
// a second enqueue of the same job a no-op that returns the first.
func ExampleClient_Enqueue() {
	ctx := context.Background()
	reg := queue.NewRegistry()
	if err := queue.Register(reg, queue.HandlerFunc[CountyReport](func(context.Context, *queue.Job[CountyReport]) error {
		return nil
	})); err != nil {
		log.Fatal(err)
	}
	client, err := queue.NewClient(connect(), reg)
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		res, err := client.Enqueue(ctx, CountyReport{County: "Travis"},
			queue.Priority(8), queue.IdempotencyKey("travis-2025-12-08"))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.Job.Kind, res.Job.Status, "duplicate:", res.Duplicate)
	}
	// A job is refused at the door, with a typed error naming what is wrong.
	_, err = client.Enqueue(ctx, CountyReport{County: "Travis"}, queue.Priority(1000))
	fmt.Println(errors.Is(err, queue.ErrInvalidOption))
	// Output:
	// county_report QUEUED duplicate: false
	// county_report QUEUED duplicate: true
	// true
}

// Client.Tx enqueues inside a transaction of yours: the job exists if and
// only if your own writes commit, and runners hear of it at the commit.
func ExampleClient_Tx() {
	ctx := context.Background()
	db := connect()
	client := clientOn(ctx, db, reports())
	type Order struct {
		ID     int64
		County string
	}
	if err := db.AutoMigrate(&Order{}); err != nil {
		log.Fatal(err)
	}
	for _, declined := range []bool{false, true} {
		err := db.Transaction(func(tx *gorm.DB) error {
			order := Order{County: "Travis"}
			if err := tx.Create(&order).Error; err != nil {
				return err
			}
			if _, err := client.Tx(tx).Enqueue(ctx, CountyReport{County: order.County}); err != nil {
				return err
			}
			if declined {
				return errors.New("payment declined") // rolls back the order and its job
			}
			return nil
		})
		fmt.Println(err)
	}
	n, err := client.Count(ctx, queue.Filter{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("jobs:", n)
	// Output:
	// <nil>
	// payment declined
	// jobs: 1
}

// A paused queue keeps its jobs QUEUED, in every runner, until it is
// resumed; jobs that were running when it was paused finish.
func ExampleClient_PauseQueue() {
	ctx := context.Background()
	db, reg := connect(), reports()
	client := clientOn(ctx, db, reg)
	if err := client.PauseQueue(ctx, queue.DefaultQueue); err != nil {
		log.Fatal(err)
	}
	_, runner := startOn(ctx, db, reg)
	defer runner.Stop(ctx)
	res, err := client.Enqueue(ctx, CountyReport{County: "Travis"})
	if err != nil {
		log.Fatal(err)
	}
	qs, err := client.Queues(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(qs[0].Name, "paused:", qs[0].Paused, "queued:", qs[0].Counts[queue.StatusQueued])

	if err := client.ResumeQueue(ctx, queue.DefaultQueue); err != nil {
		log.Fatal(err)
	}
	recs, err := client.Wait(ctx, res.Job.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(recs[0].Status)
	// Output:
	// default paused: true queued: 1
	// COMPLETED
}

// Attempts tells a job's story: each attempt's runner, times, outcome and
// error.
func ExampleClient_Attempts() {
	ctx := context.Background()
	reg := queue.NewRegistry()
	if err := queue.Register(reg, queue.HandlerFunc[CountyReport](func(ctx context.Context, j *queue.Job[CountyReport]) error {
		if j.Attempt == 1 {
			return errors.New("county server down")
		}
		return nil
	}), queue.RetryBackoff(queue.Delays{0})); err != nil {
		log.Fatal(err)
	}
	client, runner := startOn(ctx, connect(), reg)
	defer runner.Stop(ctx)
	res, err := client.Enqueue(ctx, CountyReport{County: "Harris"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.Wait(ctx, res.Job.ID); err != nil {
		log.Fatal(err)
	}
	attempts, err := client.Attempts(ctx, res.Job.ID)
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range attempts {
		fmt.Println(a.Number, a.Outcome, a.Runner == runner.ID(), a.Error)
	}
	// Output:
	// 1 retried true county server down
	// 2 completed true
}

// A runner works the jobs of its registry's kinds; Wait returns when they
// are done, and Stop lets running jobs finish.
func Example_runner() {
	ctx := context.Background()
	reg := queue.NewRegistry()
	if err := queue.Register(reg, queue.HandlerFunc[CountyReport](func(ctx context.Context, j *queue.Job[CountyReport]) error {
		if j.Attempt == 1 && j.Args.County == "Harris" {
			return errors.New("source not ready") // retried after the kind's backoff
		}
		return nil
	}), queue.RetryBackoff(queue.Delays{0})); err != nil {
		log.Fatal(err)
	}
	client, err := queue.NewClient(connect(), reg)
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	runner, err := queue.NewRunner(client) // 100 workers on queue "default"
	if err != nil {
		log.Fatal(err)
	}
	if err := runner.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer runner.Stop(ctx)

	var ids []int64
	for _, county := range []string{"Travis", "Harris"} {
		res, err := client.Enqueue(ctx, CountyReport{County: county})
		if err != nil {
			log.Fatal(err)
		}
		ids = append(ids, res.Job.ID)
	}
	recs, err := client.Wait(ctx, ids...)
	if err != nil {
		log.Fatal(err)
	}
	for _, rec := range recs {
		fmt.Println(rec.Status, "attempts:", rec.Attempts)
	}
	// Output:
	// COMPLETED attempts: 1
	// COMPLETED attempts: 2
}

// A worker process shuts down on SIGTERM (or Ctrl-C): it stops claiming,
// gives its running jobs a grace period to finish, and exits when Stop
// returns. Jobs that did not finish in time are back in the queue by then,
// their attempts uncounted, for another runner to take. Choose a grace
// period shorter than the time your orchestrator waits before it kills the
// process (Kubernetes: 30 s after SIGTERM, by default); this example gives
// five seconds, of which the last second is for putting jobs back.
func ExampleRunner_Stop() {
	// Done when the process is asked to stop.
	signalled, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	started := make(chan struct{}) // for the example to signal itself at the right time
	reg := queue.NewRegistry()
	if err := queue.Register(reg, queue.HandlerFunc[CountyReport](func(ctx context.Context, j *queue.Job[CountyReport]) error {
		fmt.Println("exporting", j.Args.County)
		close(started)
		select {
		case <-time.After(time.Hour): // a long export
			return nil
		case <-ctx.Done(): // Stop ran out of time; the job goes back to the queue
			return ctx.Err()
		}
	})); err != nil {
		log.Fatal(err)
	}
	// Not the signal's context: cancelling Start's context cuts the jobs
	// short at once, with no grace period.
	client, runner := startOn(context.Background(), connect(), reg)
	res, err := client.Enqueue(context.Background(), CountyReport{County: "Travis"})
	if err != nil {
		log.Fatal(err)
	}

	<-started
	_ = syscall.Kill(os.Getpid(), syscall.SIGTERM) // as the deployment would
	<-signalled.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := runner.Stop(ctx); err != nil {
		fmt.Println(err) // the jobs it cut short, and what became of them
	}
	// A program exits here: nothing is left PROCESSING under the runner.
	rec, err := client.Get(context.Background(), res.Job.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.Status, "attempts:", rec.Attempts)
	<-runner.Done() // the example, which does not exit, waits for the handler
	// Output:
	// exporting Travis
	// queue: stop: context deadline exceeded: cancelled 1 unfinished jobs and put them back in the queue
	// QUEUED attempts: 0
}

// countyLines is a chunked handler: it writes a county's lines chunk by
// chunk, and its Cleanup removes them if an attempt fails.
type countyLines struct {
	mu      sync.Mutex
	written map[int64][]string // by job ID: what the chunks wrote
}

func (c *countyLines) Records(_ context.Context, j *queue.Job[CountyReport]) (int64, iter.Seq2[string, error], error) {
	lines := make([]string, 2500)
	for i := range lines {
		lines[i] = fmt.Sprintf("%s,%d", j.Args.County, i)
	}
	return int64(len(lines)), func(yield func(string, error) bool) {
		for _, l := range lines {
			if !yield(l, nil) {
				return
			}
		}
	}, nil
}

func (c *countyLines) ProcessChunk(_ context.Context, j *queue.Job[CountyReport], chunk batch.Batch[string]) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.written[j.ID] = append(c.written[j.ID], chunk.Items...)
	fmt.Printf("chunk %d: %d lines from %d\n", chunk.Seq, len(chunk.Items), chunk.Offset)
	return nil
}

func (c *countyLines) Cleanup(_ context.Context, j *queue.Job[CountyReport]) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.written, j.ID)
	return nil
}

// A chunked job runs on the batch engine: its records are cut into chunks,
// its progress is saved after each, and a failed attempt is cleaned up.
func ExampleRegisterChunked() {
	ctx := context.Background()
	reg := queue.NewRegistry()
	lines := &countyLines{written: map[int64][]string{}}
	if err := queue.RegisterChunked(reg, lines, queue.ChunkSize(1000)); err != nil {
		log.Fatal(err)
	}
	client, runner := startOn(ctx, connect(), reg)
	defer runner.Stop(ctx)

	res, err := client.Enqueue(ctx, CountyReport{County: "Travis"})
	if err != nil {
		log.Fatal(err)
	}
	recs, err := client.Wait(ctx, res.Job.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(recs[0].Status, recs[0].Processed, "of", *recs[0].Total)
	// Output:
	// chunk 1: 1000 lines from 0
	// chunk 2: 1000 lines from 1000
	// chunk 3: 500 lines from 2000
	// COMPLETED 2500 of 2500
}

// shiftedClock is the real clock moved by an offset: WithClock lets a
// demonstration or a test put a runner's schedules and windows at any time.
type shiftedClock struct{ by time.Duration }

func (c shiftedClock) Now() time.Time                         { return time.Now().Add(c.by) }
func (c shiftedClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// A schedule creates jobs at its ticks, in its own time zone, exactly once
// however many runners run it; each job carries the tick's run ID. Here the
// runner's clock is set to just before 11 PM in Kolkata, so the daily tick
// comes at once.
func ExampleRegistry_Schedule() {
	ctx := context.Background()
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		log.Fatal(err)
	}
	reg := queue.NewRegistry()
	done := make(chan *queue.Job[CountyReport], 1)
	if err := queue.Register(reg, queue.HandlerFunc[CountyReport](func(_ context.Context, j *queue.Job[CountyReport]) error {
		done <- j
		return nil
	})); err != nil {
		log.Fatal(err)
	}
	if err := reg.Schedule(queue.Periodic{
		Name:     "county-daily",
		Spec:     queue.Daily(23, 0), // or Weekly, Monthly, ..., or queue.Cron("0 23 * * 1-5")
		Location: kolkata,
		Jobs: func(queue.Tick) []queue.Params {
			return []queue.Params{{Args: CountyReport{County: "Travis"}}}
		},
	}); err != nil {
		log.Fatal(err)
	}
	// A preset that can never fire is refused, saying why.
	fmt.Println(reg.Schedule(queue.Periodic{Name: "bad", Spec: queue.Daily(25, 0), Jobs: func(queue.Tick) []queue.Params { return nil }}))

	client, err := queue.NewClient(connect(), reg)
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	now := time.Now().In(kolkata)
	eleven := time.Date(now.Year(), now.Month(), now.Day(), 23, 0, 0, 0, kolkata)
	if !eleven.After(now) {
		eleven = eleven.AddDate(0, 0, 1)
	}
	runner, err := queue.NewRunner(client, queue.WithClock(shiftedClock{by: eleven.Add(-1500 * time.Millisecond).Sub(now)}))
	if err != nil {
		log.Fatal(err)
	}
	if err := runner.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer runner.Stop(ctx)
	var j *queue.Job[CountyReport]
	select {
	case j = <-done:
	case <-time.After(time.Minute):
		log.Fatal("no tick")
	}
	_, at, _ := strings.Cut(j.RunID, "T")
	fmt.Println(j.Args.County, "at", at)
	// Output:
	// queue: invalid option: schedule "bad": Daily(25, 0): hour 25 not in [0, 23]
	// Travis at 23:00:00+05:30
}

// A dependency rule releases a child job when its parents complete: here
// each county report releases that county's summary, which reads what the
// report left with SetOutput.
func ExampleDepend() {
	ctx := context.Background()
	reg := queue.NewRegistry()
	summaries := make(chan string, 1)
	if err := queue.Register(reg, queue.HandlerFunc[CountyReport](func(ctx context.Context, j *queue.Job[CountyReport]) error {
		return j.SetOutput(ctx, map[string]int{"rows": 42})
	})); err != nil {
		log.Fatal(err)
	}
	if err := queue.Register(reg, queue.HandlerFunc[CountySummary](func(ctx context.Context, j *queue.Job[CountySummary]) error {
		parents, err := j.Parents(ctx)
		if err != nil {
			return err
		}
		summaries <- fmt.Sprintf("summary of %s from %s", j.Args.County, parents[0].Output)
		return nil
	})); err != nil {
		log.Fatal(err)
	}
	if err := queue.Depend(reg, queue.Rule{Name: "county-summary", Parents: []string{"county_report"}, Each: true},
		func(parents []queue.JobRecord) (CountySummary, []queue.EnqueueOption) {
			var report CountyReport
			_ = json.Unmarshal(parents[0].Payload, &report)
			return CountySummary{County: report.County, Report: parents[0].ID}, nil
		}); err != nil {
		log.Fatal(err)
	}
	client, runner := startOn(ctx, connect(), reg)
	defer runner.Stop(ctx)

	if _, err := client.Enqueue(ctx, CountyReport{County: "Travis"}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-summaries)
	// Output:
	// summary of Travis from {"rows": 42}
}

// The morning review of a run: counts by status, the failures with their
// errors, and the selective retry of the failed jobs.
func ExampleClient_Review() {
	ctx := context.Background()
	reg := queue.NewRegistry()
	if err := queue.Register(reg, queue.HandlerFunc[CountyReport](func(ctx context.Context, j *queue.Job[CountyReport]) error {
		if j.Args.County == "Harris" && j.Attempt == 1 {
			return queue.Permanent(errors.New("no data for Harris"))
		}
		return nil
	})); err != nil {
		log.Fatal(err)
	}
	client, runner := startOn(ctx, connect(), reg)
	defer runner.Stop(ctx)

	var ids []int64
	for _, county := range []string{"Travis", "Harris", "Dallas"} {
		res, err := client.Enqueue(ctx, CountyReport{County: county}, queue.InRun("night-2025-12-08"))
		if err != nil {
			log.Fatal(err)
		}
		ids = append(ids, res.Job.ID)
	}
	if _, err := client.Wait(ctx, ids...); err != nil {
		log.Fatal(err)
	}
	rv, err := client.Review(ctx, queue.ReviewQuery{RunID: "night-2025-12-08"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("completed:", rv.Counts[queue.StatusCompleted], "failed:", rv.Counts[queue.StatusFailed])
	for _, f := range rv.Failed {
		fmt.Println(f.ID == ids[1], *f.LastError)
	}
	n, err := client.RetryFailed(ctx, queue.Filter{RunID: rv.Query.RunID})
	if err != nil {
		log.Fatal(err)
	}
	recs, err := client.Wait(ctx, ids...)
	if err != nil {
		log.Fatal(err)
	}
	var now []queue.Status
	for _, r := range recs {
		now = append(now, r.Status)
	}
	fmt.Println("retried:", n, "now:", now)
	// Output:
	// completed: 2 failed: 1
	// true permanent: no data for Harris
	// retried: 1 now: [COMPLETED COMPLETED COMPLETED]
}

// A handler that writes rows completes its job in the same transaction:
// the rows and the job's completion commit together, or not at all, so a
// crash at any point leaves neither or both, and the job's next attempt
// does not write the rows a second time.
func ExampleJob_CompleteTx() {
	ctx := context.Background()
	db := connect()
	if err := db.Exec("CREATE TABLE county_totals (county text PRIMARY KEY, total bigint NOT NULL)").Error; err != nil {
		log.Fatal(err)
	}
	reg := queue.NewRegistry()
	if err := queue.Register(reg, queue.HandlerFunc[CountyReport](func(ctx context.Context, j *queue.Job[CountyReport]) error {
		return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec("INSERT INTO county_totals (county, total) VALUES (?, ?)", j.Args.County, 42).Error; err != nil {
				return err
			}
			// Last, just before the commit. ErrLeaseLost (the job was
			// cancelled or rescued) rolls the row back with the rest.
			return j.CompleteTx(ctx, tx)
		})
	})); err != nil {
		log.Fatal(err)
	}
	client, runner := startOn(ctx, db, reg)
	defer runner.Stop(ctx)

	res, err := client.Enqueue(ctx, CountyReport{County: "Travis"})
	if err != nil {
		log.Fatal(err)
	}
	done, err := client.Wait(ctx, res.Job.ID)
	if err != nil {
		log.Fatal(err)
	}
	var total int64
	if err := db.Raw("SELECT total FROM county_totals WHERE county = ?", "Travis").Scan(&total).Error; err != nil {
		log.Fatal(err)
	}
	fmt.Println(done[0].Status, total)
	// Output:
	// COMPLETED 42
}
