package queue

import "time"

// WatchIdle makes r's watch of idle connections look every every and warn
// at limit closes, where the defaults would need a test to run for long.
// Call it before Start.
func WatchIdle(r *Runner, every time.Duration, limit int64) {
	r.idle.Every, r.idle.limit = every, limit
}

// PoolWarning is the message of the runner's warnings about its pool.
const PoolWarning = poolWarning
