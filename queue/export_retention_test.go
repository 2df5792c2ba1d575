package queue

import (
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/maintain"
)

// Upkeep returns c's roll-up and pruning tasks, going by now.
func Upkeep(c *Client, now func() time.Time) []maintain.Task { return c.upkeepAt(now) }
