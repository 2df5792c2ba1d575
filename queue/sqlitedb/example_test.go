package sqlitedb_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/sqlitedb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

type hello struct{ Name string }

func (hello) Kind() string { return "hello" }

// A queue in a file: no server to run. Runners in this process are woken
// at once; other processes on the file find jobs when they poll.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "sheaf")
	defer os.RemoveAll(dir)
	db, err := sqlitedb.Open(filepath.Join(dir, "jobs.db"))
	if err != nil {
		panic(err)
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()

	reg := queue.NewRegistry()
	done := make(chan string, 1)
	queue.Register(reg, queue.HandlerFunc[hello](func(ctx context.Context, j *queue.Job[hello]) error {
		done <- "hello, " + j.Args.Name
		return nil
	}))
	ctx := context.Background()
	client, err := queue.NewClient(db, reg)
	if err != nil {
		panic(err)
	}
	if err := client.Migrate(ctx); err != nil {
		panic(err)
	}
	runner, err := queue.NewRunner(client)
	if err != nil {
		panic(err)
	}
	if err := runner.Start(ctx); err != nil {
		panic(err)
	}
	res, err := client.Enqueue(ctx, hello{Name: "SQLite"})
	if err != nil {
		panic(err)
	}
	fmt.Println(<-done)
	jobs, _ := client.Wait(ctx, res.Job.ID)
	fmt.Println(jobs[0].Status)
	if err := runner.Stop(ctx); err != nil {
		panic(err)
	}
	// Output:
	// hello, SQLite
	// COMPLETED
}

// An in-memory database would be one per connection; Open refuses it.
func ExampleOpen_memory() {
	_, err := sqlitedb.Open(":memory:")
	fmt.Println(err != nil)
	// Output: true
}
