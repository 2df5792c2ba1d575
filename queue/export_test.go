package queue

import (
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/runner"
)

// WatchIdle makes r's watch of idle connections look every every and warn
// at limit closes, where the defaults would need a test to run for long.
// Call it before Start.
func WatchIdle(r *Runner, every time.Duration, limit int64) { r.r.WatchIdle(every, limit) }

// PoolWarning is the message of the runner's warnings about its pool.
const PoolWarning = runner.PoolWarning
