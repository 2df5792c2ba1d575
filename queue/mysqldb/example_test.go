package mysqldb_test

import (
	"context"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/mysqldb"
)

type hello struct{ Name string }

func (hello) Kind() string { return "hello" }

// A queue on MariaDB: runners in this process are woken at once; other
// processes on the database find jobs when they poll.
func ExampleOpen() {
	db, err := mysqldb.Open("mysql://root@127.0.0.1:3306/jobs")
	if err != nil {
		panic(err)
	}
	reg := queue.NewRegistry()
	if err := queue.Register(reg, queue.HandlerFunc[hello](func(ctx context.Context, j *queue.Job[hello]) error {
		return nil
	})); err != nil {
		panic(err)
	}
	client, err := queue.NewClient(db, reg)
	if err != nil {
		panic(err)
	}
	if err := client.Migrate(context.Background()); err != nil {
		panic(err)
	}
	if _, err := client.Enqueue(context.Background(), hello{Name: "world"}); err != nil {
		panic(err)
	}
}
