package run

import (
	"context"
	"time"
)

// Poller calls Fetch on the goroutine it owns: when woken (Wake), when a
// value given to Later falls due (after Due is called with it), when the
// time Opens names comes on Clock, when the time Fetch asked to be called
// back at comes, and every Every otherwise (after Polled is called).
type Poller[T any] struct {
	Every time.Duration
	// Fetch does the work and returns how soon to call it again when that
	// is sooner than Every (0: not sooner).
	Fetch  func(context.Context) time.Duration
	Polled func()
	Due    func(T)
	// Clock and Opens: the next time, on Clock, at which Fetch should run
	// (a batch window opens), or zero for none.
	Clock Clock
	Opens func(now time.Time) time.Time

	wake  chan struct{}
	later chan timed[T]
	loop  Loop
}

type timed[T any] struct {
	at time.Time
	v  T
}

// maxLater bounds the values kept for Later: a flood of them is found by
// polling anyway.
const maxLater = 1024

// Start starts the loop; the first Fetch is at once.
func (p *Poller[T]) Start(ctx context.Context) {
	p.wake, p.later = make(chan struct{}, 1), make(chan timed[T], maxLater)
	p.loop.Start(ctx, p.run)
}

// Stop stops the loop, waiting for a Fetch under way.
func (p *Poller[T]) Stop() { p.loop.Stop() }

// Wake asks for a Fetch now (coalesced with any already asked for).
func (p *Poller[T]) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Later asks for Due(v) and a Fetch at time at, unless too many are
// pending already.
func (p *Poller[T]) Later(at time.Time, v T) {
	select {
	case p.later <- timed[T]{at, v}:
	default:
	}
}

func (p *Poller[T]) run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	var due []timed[T]
	var opens <-chan time.Time
	var opensAt time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-timer.C:
			p.Polled()
		case <-opens:
			opens, opensAt = nil, time.Time{}
		case d := <-p.later:
			if len(due) < maxLater {
				due = append(due, d)
			}
		}
		now := time.Now()
		kept := due[:0]
		for _, d := range due {
			if d.at.After(now) {
				kept = append(kept, d)
				continue
			}
			p.Due(d.v)
		}
		due = kept
		clockNow := p.Clock.Now()
		if at := p.Opens(clockNow); !at.Equal(opensAt) {
			opens, opensAt = nil, at
			if !at.IsZero() {
				opens = p.Clock.After(at.Sub(clockNow))
			}
		}
		wait := p.Fetch(ctx)
		if wait == 0 {
			wait = p.Every
		}
		for _, d := range due {
			wait = min(wait, max(d.at.Sub(now), 0))
		}
		timer.Reset(wait)
	}
}
