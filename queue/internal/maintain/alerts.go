package maintain

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// AlertPrune is the Task that deletes the alert state (package queue/alert)
// older than Keep: episodes that ended, with their notices once every one
// is sent, and silences that ended. It deletes PruneBatch episodes a
// transaction, with PrunePause between batches, as the job pruner does.
type AlertPrune struct {
	Store store.Store
	DB    *gorm.DB
	// Keep is how long the state is kept after it ended; negative:
	// forever.
	Keep time.Duration
	// Every is the delay between passes; 0: PruneEvery.
	Every time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Name implements Task.
func (*AlertPrune) Name() string { return "alert prune" }

// Run implements Task.
func (p *AlertPrune) Run(ctx context.Context) (time.Duration, error) {
	every := cmp.Or(p.Every, PruneEvery)
	if p.Keep < 0 {
		return every, nil
	}
	n, err := store.PruneAlerts(ctx, p.Store, p.DB, clock(p.Now).Add(-p.Keep), PruneBatch)
	if err != nil {
		return every, fmt.Errorf("alert prune: %w", err)
	}
	if n == PruneBatch {
		return PrunePause, nil // more to come
	}
	return every, nil
}
