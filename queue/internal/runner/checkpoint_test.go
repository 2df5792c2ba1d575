package runner

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// checkpoints counts a store's checkpoints, and tells of each.
type checkpoints struct {
	store.Store
	made chan struct{}
}

func (c checkpoints) Checkpoint(ctx context.Context) error {
	select {
	case c.made <- struct{}{}:
	default:
	}
	return c.Store.(store.Checkpointer).Checkpoint(ctx)
}

// A runner on SQLite checkpoints the write-ahead log from Start to Stop,
// beside its work, every CheckpointEvery.
func TestRunnerCheckpointsSQLite(t *testing.T) {
	t.Parallel()
	db := pgtest.NewMigratedSQLite(t, "queue", migrate)
	st, err := store.Open(db.Gorm)
	require.NoError(t, err)
	made := make(chan struct{}, 1)
	started := make(chan struct{})
	cfg := config(kinds{"k": {Work: func(context.Context, *Execution) error { close(started); return nil }}})
	r, ch, id := startOne(t, cfg, checkpoints{Store: st, made: made}, db.Gorm, "k", started)
	collect(t, ch, map[int64]int{id: 2})
	for range 2 {
		select {
		case <-made:
		case <-time.After(30 * time.Second):
			t.Fatal("no checkpoint in 30 s")
		}
	}
	stop(t, r)
	requireStatus(t, st, id, "COMPLETED")
}
