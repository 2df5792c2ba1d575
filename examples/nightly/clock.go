package main

import (
	"sync"
	"time"
)

// fastClock is the queue.Clock of the demonstration: simulated time that
// runs speed times faster than the real clock once started, and that the
// program can move forward (a day passing, the night giving way to the
// morning). The runner asks it when schedules tick and whether the batch
// window is open; runs, leases, retries and durations stay on the database's
// clock.
type fastClock struct {
	speed   time.Duration
	waiting chan struct{} // closed when someone first waits on the clock

	mu      sync.Mutex
	running bool
	waited  bool      // waiting is closed
	base    time.Time // simulated time at origin
	origin  time.Time // real time when base was set, once running
	waiters []clockWaiter
	timer   *time.Timer // fires when the earliest waiter is due
}

type clockWaiter struct {
	at time.Time
	ch chan time.Time
}

// newFastClock returns a clock that stands at start until run.
func newFastClock(start time.Time, speed int) *fastClock {
	return &fastClock{speed: time.Duration(speed), base: start, waiting: make(chan struct{})}
}

// run starts the clock.
func (c *fastClock) run() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running, c.origin = true, time.Now()
	c.fireLocked()
}

// Now returns the simulated time.
func (c *fastClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nowLocked()
}

func (c *fastClock) nowLocked() time.Time {
	if !c.running {
		return c.base
	}
	return c.base.Add(time.Since(c.origin) * c.speed)
}

// After returns a channel that receives once simulated time has moved d
// past now, whether by running or by a Set.
func (c *fastClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1) // buffered: a waiter that gave up never blocks the clock
	now := c.nowLocked()
	if d <= 0 {
		ch <- now
		return ch
	}
	if !c.waited {
		c.waited = true
		close(c.waiting)
	}
	c.waiters = append(c.waiters, clockWaiter{at: now.Add(d), ch: ch})
	c.fireLocked()
	return ch
}

// Set moves simulated time to t, from where it runs on, and fires the
// waiters it passes.
func (c *fastClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.base, c.origin = t, time.Now()
	c.fireLocked()
}

// fireLocked fires the waiters that are due and sets the timer for the
// earliest of the rest.
func (c *fastClock) fireLocked() {
	now := c.nowLocked()
	kept := c.waiters[:0]
	var next time.Time
	for _, w := range c.waiters {
		if !w.at.After(now) {
			w.ch <- now
			continue
		}
		kept = append(kept, w)
		if next.IsZero() || w.at.Before(next) {
			next = w.at
		}
	}
	c.waiters = kept
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	if !next.IsZero() && c.running {
		// Round the real wait up, so the timer never fires before its time.
		real := (next.Sub(now) + c.speed - 1) / c.speed
		c.timer = time.AfterFunc(real, func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.fireLocked()
		})
	}
}

// stop releases the clock's timer; waiters still pending never fire.
func (c *fastClock) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.waiters = nil
}
