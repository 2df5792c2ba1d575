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
// most once per ttl whatever the number of dashboards that poll it. Once
// counts are older than ttl, but no older than StaleTTLs times ttl, a
// request gets them at once and starts one reading afresh in the
// background for the requests after it; older ones, or none yet, are read
// while the request waits, and callers that arrive meanwhile wait for
// that reading. Responses' as_of says when their counts were read. The
// console's own pauses and resumes are shown at once; other processes'
// within ttl, or StaleTTLs times ttl on a dashboard left alone.
// The dashboard's overview reuses its chart of the last hour as its
// counts, and its chart of the last day, which changes slowly, twelve
// times as long (a minute, by default).
// Default DefaultCountsTTL; 0 reads the counts for every request.
func WithCountsCache(ttl time.Duration) Option {
	return func(c *config) error {
		c.countsTTL = max(ttl, 0)
		return nil
	}
}

// StaleTTLs is how many times its cache's time (WithCountsCache) the
// console still serves a reading at once while it reads it afresh.
const StaleTTLs = 12

// refreshTimeout bounds a reading afresh in the background.
const refreshTimeout = 30 * time.Second

// cached is a value read at most once per ttl.
type cached[T any] struct {
	mu  sync.Mutex
	at  time.Time
	val T
	ok  bool
	// refreshing says a reading afresh runs in the background; cleared is
	// when clear last ran: what was read before it is not kept.
	refreshing bool
	cleared    time.Time
	// now is time.Now, but in tests.
	now func() time.Time
}

// get returns the value read at most ttl ago, or, at once, one read at
// most StaleTTLs·ttl ago while a reading afresh starts in the background,
// or reads it; and when what it returns was read.
func (c *cached[T]) get(ctx context.Context, ttl time.Duration, read func(context.Context) (T, error)) (T, time.Time, error) {
	if ttl <= 0 {
		at := c.clock()
		v, err := read(ctx)
		return v, at, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok {
		age := c.clock().Sub(c.at)
		if age < ttl {
			return c.val, c.at, nil
		}
		if age < StaleTTLs*ttl {
			if !c.refreshing {
				c.refreshing = true
				go c.refresh(context.WithoutCancel(ctx), read)
			}
			return c.val, c.at, nil
		}
	}
	at := c.clock()
	v, err := read(ctx)
	if err != nil {
		return v, at, err
	}
	c.keep(v, at)
	return v, at, nil
}

// refresh reads the value afresh and keeps it; after an error, the value
// before stays, and the next get past ttl tries again.
func (c *cached[T]) refresh(ctx context.Context, read func(context.Context) (T, error)) {
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	at := c.clock()
	v, err := read(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refreshing = false
	if err == nil {
		c.keep(v, at)
	}
}

// keep keeps v, read at at, unless what is kept was read later or a
// clear came after at; c.mu held.
func (c *cached[T]) keep(v T, at time.Time) {
	if c.ok && c.at.After(at) || c.cleared.After(at) {
		return
	}
	c.val, c.at, c.ok = v, at, true
}

func (c *cached[T]) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// clear drops the value, so that the next get reads it.
func (c *cached[T]) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero T
	c.val, c.ok, c.cleared = zero, false, c.clock()
}
