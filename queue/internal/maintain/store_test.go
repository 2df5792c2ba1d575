package maintain_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue/internal/maintain"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// cuttable is an elector that can be cut off from its database.
type cuttable struct {
	maintain.Elector
	cut atomic.Bool
}

func (c *cuttable) Lead(ctx context.Context, holder string, ttl time.Duration) (store.LeadResult, error) {
	if c.cut.Load() {
		<-ctx.Done()
		return store.LeadResult{}, ctx.Err()
	}
	return c.Elector.Lead(ctx, holder, ttl)
}

// On each database, with real time: of two leaders, one runs the task; cut
// off, it stops it before the other takes over; the other stops and hands
// over to the first, healed; the task never runs on both at once.
func TestLeadersOnTheStores(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"postgres", "sqlite"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			newDB := pgtest.NewSQLite
			if name == "postgres" {
				newDB = pgtest.New
			}
			db := newDB(t)
			st, err := store.Open(db.Gorm)
			require.NoError(t, err)
			_, err = st.Migrate(context.Background())
			require.NoError(t, err)

			const lease = 3 * time.Second // a third of it, 1 s, is the margin of a loaded machine
			ctx := context.Background()
			o := newOverlap()
			ea, eb := &cuttable{Elector: st}, &cuttable{Elector: st}
			a := maintain.New(maintain.Config{ID: "a", TTL: lease, Elector: ea, Tasks: []maintain.Task{o.task("a")}, Log: quiet})
			b := maintain.New(maintain.Config{ID: "b", TTL: lease, Elector: eb, Tasks: []maintain.Task{o.task("b")}, Log: quiet})
			a.Start(ctx)
			t.Cleanup(func() { require.NoError(t, a.Stop(ctx)) })
			require.Equal(t, "a", <-o.started)
			b.Start(ctx)
			t.Cleanup(func() { require.NoError(t, b.Stop(ctx)) })

			ea.cut.Store(true)
			cut := time.Now()
			require.Equal(t, "a", <-o.finished)
			require.Equal(t, "b", <-o.started)
			t.Logf("b took over %v after a was cut off", time.Since(cut))
			leader, err := st.Leader(ctx)
			require.NoError(t, err)
			require.Equal(t, "b", leader)

			ea.cut.Store(false)
			require.NoError(t, b.Stop(ctx))
			stopped := time.Now()
			require.Equal(t, "b", <-o.finished)
			require.Equal(t, "a", <-o.started)
			t.Logf("a took over %v after b stopped", time.Since(stopped))
			require.Equal(t, 1, o.mostAtOnce(), "never on both")
		})
	}
}
