package queuetest

import (
	"slices"
	"sync"
	"time"
)

// Clock is a simulated queue.Clock for testing schedules and batch
// windows (queue.WithClock): it stands at the time it was given until the
// test moves it with Set or Advance, which fire the waits it passes.
//
// A runner reads the clock as it starts its schedules, and a tick whose
// time passed before that is missed (see Periodic.Missed). So move the
// clock only once the runner waits on it, as Waiting tells.
type Clock struct {
	mu       sync.Mutex
	now      time.Time
	waiters  []clockWaiter
	watchers []watcher // of Waiting
}

type watcher struct {
	n    int
	done chan struct{}
}

type clockWaiter struct {
	at time.Time
	ch chan time.Time
}

// NewClock returns a clock that stands at start.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start}
}

// Now returns the simulated time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives the simulated time once the clock
// has been moved d past now; at once if d is not positive.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1) // buffered: a waiter that gave up never blocks the clock
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, clockWaiter{at: c.now.Add(d), ch: ch})
	c.watchers = slices.DeleteFunc(c.watchers, func(w watcher) bool {
		if len(c.waiters) >= w.n {
			close(w.done)
			return true
		}
		return false
	})
	return ch
}

// Waiting returns a channel closed once n waits on the clock are pending
// at once (calls of After with a positive duration that the clock has not
// yet reached, abandoned ones included): with n runners, each has read
// the time and waits for its schedules' next tick or its window's next
// edge. Call it after moving the clock to wait for the runners to take in
// the move.
func (c *Clock) Waiting(n int) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	done := make(chan struct{})
	if len(c.waiters) >= n {
		close(done)
	} else {
		c.watchers = append(c.watchers, watcher{n: n, done: done})
	}
	return done
}

// Set moves the clock to t (backwards too) and fires the waits that are
// due by then.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(t)
}

// Advance moves the clock d forward, as Set.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(c.now.Add(d))
}

func (c *Clock) setLocked(t time.Time) {
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(t) {
			kept = append(kept, w)
		} else {
			w.ch <- t
		}
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
}
