package run

import (
	"context"
	"log/slog"
	"time"
)

// Reconnect keeps Listen running on the goroutine it owns: when Listen
// returns (its connection broke), it logs why and calls it again after
// Pause. Whatever the listener would have heard meanwhile, polling finds.
type Reconnect struct {
	Listen func(context.Context) error
	Pause  time.Duration
	Log    *slog.Logger
	loop   Loop
}

// Start starts listening.
func (l *Reconnect) Start(ctx context.Context) {
	l.loop.Start(ctx, func(ctx context.Context) {
		for ctx.Err() == nil {
			err := l.Listen(ctx)
			if ctx.Err() != nil {
				return
			}
			l.Log.Warn("queue: listener connection lost; polling until it is back", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(l.Pause):
			}
		}
	})
}

// Stop stops listening and waits for Listen to return.
func (l *Reconnect) Stop() { l.loop.Stop() }
