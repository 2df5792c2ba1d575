// Package run holds the moving parts of a queue runner, each one type that
// owns its goroutines, with a Start and a Stop that returns once they have
// returned: the workers (Pool), the completer (Batcher), the claim loop
// (Poller), lease renewal (Renewer), periodic checks (Periodic), the listener
// (Reconnect) and the schedule loop (Loop). They know nothing of jobs: the
// queue's Runner gives each the functions that do its work and stops them
// in order.
package run

import (
	"context"
	"sync"
	"time"
)

// Clock is the time source of the parts that wait on the runner's clock
// (window openings), which tests and demonstrations may drive.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// Loop runs one function on a goroutine of its own, from Start until Stop
// cancels its context and waits for it to return.
type Loop struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs fn(ctx') on a new goroutine, where ctx' is ctx until Stop.
func (l *Loop) Start(ctx context.Context, fn func(context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	l.mu.Lock()
	l.cancel, l.done = cancel, done
	l.mu.Unlock()
	go func() {
		defer close(done)
		fn(ctx)
	}()
}

// Stop cancels the loop's context and waits for its function to return.
// It is safe to call more than once, and without Start.
func (l *Loop) Stop() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// Periodic calls Do every Every, from Start until Stop.
type Periodic struct {
	Every time.Duration
	Do    func(context.Context)
	loop  Loop
}

// Start starts calling Do; the first call is one interval from now.
func (p *Periodic) Start(ctx context.Context) {
	p.loop.Start(ctx, func(ctx context.Context) {
		t := time.NewTicker(p.Every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				p.Do(ctx)
			}
		}
	})
}

// Stop stops the calls, waiting for one under way.
func (p *Periodic) Stop() { p.loop.Stop() }
