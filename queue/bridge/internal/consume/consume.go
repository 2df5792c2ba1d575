// Package consume holds what the broker packages' consumers share: the
// lifecycle of their loop, and retrying a step until it succeeds.
package consume

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// RetryDelay is how long a consumer waits before it tries again a step
// that failed (an enqueue, a dead letter, a commit).
const RetryDelay = 200 * time.Millisecond

// Loop runs one consumer's loop on a goroutine of its own, from Start to
// Stop.
type Loop struct {
	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	done    chan struct{}
	err     error
}

// Start runs run on a goroutine of its own, with a context that Stop
// cancels; setup runs first, and its error is returned, with nothing
// started. Calls after the first, and after Stop, do nothing.
func (l *Loop) Start(ctx context.Context, setup func() error, run func(ctx context.Context) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return nil
	}
	if err := setup(); err != nil {
		return err
	}
	l.started, l.done = true, make(chan struct{})
	ctx, l.cancel = context.WithCancel(ctx)
	go func() {
		defer close(l.done)
		l.err = run(ctx)
	}()
	return nil
}

// Stop cancels the loop and waits for it to return, or for ctx. It
// returns the loop's error, unless that is its cancellation. It is safe
// without Start, and idempotent.
func (l *Loop) Stop(ctx context.Context) error {
	l.mu.Lock()
	wasStarted := l.done != nil
	l.started = true
	if l.cancel != nil {
		l.cancel()
	}
	l.mu.Unlock()
	if !wasStarted {
		return nil
	}
	select {
	case <-l.done:
		if errors.Is(l.err, context.Canceled) {
			return nil
		}
		return l.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Retry runs step until it succeeds or ctx ends, logging its failures as
// what failed.
func Retry(ctx context.Context, log *slog.Logger, what string, step func() error) error {
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		err := step()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.ErrorContext(ctx, what, "err", err)
		if err := Sleep(ctx, RetryDelay); err != nil {
			return err
		}
	}
}

// Sleep waits d, or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
