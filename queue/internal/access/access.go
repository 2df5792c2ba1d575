// Package access reaches what a queue.Client holds (its database handle
// and store) from the queue's own packages outside the root, such as
// queue/alert, without exporting it to users.
package access

import (
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Client returns the database handle and store of client, a *queue.Client.
// Package queue sets it as it is initialised; it panics given anything
// else.
var Client func(client any) (*gorm.DB, store.Store)
