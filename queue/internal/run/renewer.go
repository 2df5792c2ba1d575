package run

import (
	"context"
	"log/slog"
	"time"
)

// Renewer calls Renew every Every, on the goroutine it owns. A Renew that
// fails is tried again at once and then with pauses growing to MaxPause,
// so that a runner loses its leases only when it cannot reach the database
// for about a Lease. It logs when renewal starts failing, when it has
// failed for a whole Lease, and when it works again.
type Renewer struct {
	Every, MaxPause, Lease time.Duration
	Renew                  func(context.Context) error
	Log                    *slog.Logger

	poke chan struct{}
	loop Loop
}

// Start starts renewing; the first Renew is one interval from now, or at
// the first Poke.
func (k *Renewer) Start(ctx context.Context) {
	k.poke = make(chan struct{}, 1)
	k.loop.Start(ctx, k.run)
}

// Poke asks for a Renew now (coalesced with any already asked for).
func (k *Renewer) Poke() {
	select {
	case k.poke <- struct{}{}:
	default:
	}
}

// Stop stops renewing, waiting for a Renew under way.
func (k *Renewer) Stop() { k.loop.Stop() }

func (k *Renewer) run(ctx context.Context) {
	timer := time.NewTimer(k.Every)
	defer timer.Stop()
	var failingSince time.Time
	var pause time.Duration
	warned := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-k.poke:
		}
		err := k.Renew(ctx)
		next := k.Every
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			if !failingSince.IsZero() {
				k.Log.Info("queue: lease renewal works again", "failing_for", time.Since(failingSince))
			}
			failingSince, pause, warned = time.Time{}, 0, false
		default:
			k.Log.Debug("queue: lease renewal failed", "err", err)
			if failingSince.IsZero() {
				failingSince = time.Now()
				k.Log.Warn("queue: lease renewal failed; trying again", "err", err)
			}
			if !warned && time.Since(failingSince) > k.Lease {
				warned = true
				k.Log.Error("queue: leases not renewed for a whole lease; other runners may rescue this runner's jobs",
					"failing_for", time.Since(failingSince), "err", err)
			}
			pause = min(max(2*pause, 20*time.Millisecond), k.MaxPause)
			next = pause
		}
		timer.Reset(next)
	}
}
