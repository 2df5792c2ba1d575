package console

import (
	"context"
	"sync"
	"time"
)

// DefaultCountsTTL is how long GET /api/stats and GET /api/queues reuse the
// counts they read, unless WithCountsCache says otherwise.
const DefaultCountsTTL = 5 * time.Second

// WithCountsCache sets how long GET /api/stats and GET /api/queues reuse
// the counts they read. Each counts every job in the table, which takes
// most of a second on a million jobs: reused, the console reads them at
// most once per ttl whatever the number of dashboards that poll it, and
// callers that arrive while they are read wait for that reading. Their
// responses' as_of says when the counts were read. The console's own
// pauses and resumes are shown at once; other processes' within ttl.
// The dashboard's overview reuses its chart of the last hour as long, and
// its chart of the last day, which changes slowly, twelve times as long (a
// minute, by default).
// Default DefaultCountsTTL; 0 reads the counts for every request.
func WithCountsCache(ttl time.Duration) Option {
	return func(c *config) error {
		c.countsTTL = max(ttl, 0)
		return nil
	}
}

// cached is a value read at most once per ttl.
type cached[T any] struct {
	mu  sync.Mutex
	at  time.Time
	val T
	ok  bool
}

// get returns the value read at most ttl ago, or reads it, and when it was
// read.
func (c *cached[T]) get(ctx context.Context, ttl time.Duration, read func(context.Context) (T, error)) (T, time.Time, error) {
	if ttl <= 0 {
		at := time.Now()
		v, err := read(ctx)
		return v, at, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok && time.Since(c.at) < ttl {
		return c.val, c.at, nil
	}
	at := time.Now()
	v, err := read(ctx)
	if err != nil {
		return v, at, err
	}
	c.val, c.at, c.ok = v, at, true
	return v, at, nil
}

// clear drops the value, so that the next get reads it.
func (c *cached[T]) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero T
	c.val, c.ok = zero, false
}
