package exampledb_test

import (
	"context"
	"fmt"
	"os"

	"github.com/sheaf-dev/sheaf/examples/internal/exampledb"
)

// With no URL, an example works in an SQLite file of its own, which Close
// removes with its folder.
func ExampleOpen() {
	db, err := exampledb.Open(context.Background(), "sheaf_example", os.Getenv("DATABASE_URL"), 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	fmt.Println("working in", db.Where)
}
