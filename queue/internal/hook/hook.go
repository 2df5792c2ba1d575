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
