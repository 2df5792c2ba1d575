package queue

import (
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/access"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

func init() {
	access.Client = func(client any) (*gorm.DB, store.Store) {
		c := client.(*Client)
		return c.db, c.st
	}
}
