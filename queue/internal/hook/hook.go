// Package hook calls package queue's hooks and observers: in a chain that
// threads a context through them, or fanned out with panics contained. It
// is generic over queue's hook and event types, which it cannot import.
package hook

import (
	"context"
	"log/slog"
	"slices"

	"github.com/sheaf-dev/sheaf/worker"
)

// Chain calls the hook that pick finds in each of hooks (nil for none),
// each with the context the one before returned, and returns the last
// context and a function that calls the hooks' ends in reverse order, or
// nil if none returned one.
func Chain[H, E any](ctx context.Context, hooks []H, pick func(H) func(context.Context) (context.Context, func(E))) (context.Context, func(E)) {
	var ends []func(E)
	for _, h := range hooks {
		if call := pick(h); call != nil {
			var end func(E)
			if ctx, end = call(ctx); end != nil {
				ends = append(ends, end)
			}
		}
	}
	if len(ends) == 0 {
		return ctx, nil
	}
	return ctx, func(e E) {
		for _, end := range slices.Backward(ends) {
			end(e)
		}
	}
}

// Fanout returns a function that calls each of fns, in order, with an
// event; a panic in one is recovered and logged to log.
func Fanout[E any](log *slog.Logger, fns []func(E)) func(E) {
	return func(e E) {
		for _, fn := range fns {
			if err := worker.Safely(func() error { fn(e); return nil }); err != nil {
				log.Error("queue: observer panicked", "err", err)
			}
		}
	}
}

// Observers returns the function that reports an event to the hooks'
// observe functions (pick returns a hook's, nil for none), then to obs if
// not nil, each contained as Fanout does: an observer that sees an event
// finds the hooks' instruments already updated.
func Observers[H, E any](log *slog.Logger, hooks []H, pick func(H) func(E), obs func(E)) func(E) {
	var fns []func(E)
	for _, h := range hooks {
		if fn := pick(h); fn != nil {
			fns = append(fns, fn)
		}
	}
	if obs != nil {
		fns = append(fns, obs)
	}
	return Fanout(log, fns)
}

// Call calls fn, the user's code, on a goroutine of its own and returns
// its error: a panic as a *worker.PanicError, a runtime.Goexit (which would
// end the caller's goroutine) as one wrapping worker.ErrGoexit. For
// callbacks off the hot path: schedule ticks and rule children.
func Call(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		if worker.Try(fn, func(err error) { done <- err }) {
			done <- nil
		}
	}()
	return <-done
}
