package maintain

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// runCountsPage is how many runs without counts RunCounts reads at a time.
const runCountsPage = 100

// RunCounts keeps the counts of finished runs in their rows of the runs
// table (store.KeepRunCounts), so that listing runs reads them rather than
// every job, and they outlive the jobs that retention prunes.
type RunCounts struct {
	Store store.Store
	DB    *gorm.DB
	// Every is the pause between rounds that found no more to keep.
	Every time.Duration
	// Kept, if set, is told of the runs whose counts a round kept: the
	// queue reviews each, so that the review keeps its slow jobs before
	// anyone asks (see store.KeepSlow).
	Kept func(ctx context.Context, runs []string)
}

// Name implements Task.
func (RunCounts) Name() string { return "run counts" }

// Run implements Task: it keeps the counts of every run that has finished
// since the last round.
func (t RunCounts) Run(ctx context.Context) (time.Duration, error) {
	kept, err := store.KeepRunCounts(ctx, t.Store, t.DB, runCountsPage)
	if len(kept) > 0 && t.Kept != nil {
		t.Kept(ctx, kept)
	}
	return t.Every, err
}
