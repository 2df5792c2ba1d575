package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Alert state that ended before the cut-off goes, in batches, with its
// notices; an episode with a notice not yet sent, one still open, and
// state that ended later stay.
func TestPruneAlerts(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		cut := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
		old, recent := cut.Add(-time.Hour), cut.Add(time.Hour)
		episode := func(key, state string, ended time.Time, sent bool) int64 {
			e := store.AlertEpisode{Rule: "dead", Key: key, State: state, StartedAt: ended.Add(-time.Minute)}
			if state == store.EpisodeResolved {
				e.ResolvedAt = &ended
			}
			id, err := store.InsertEpisode(ctx, st, db, e, []store.AlertNotice{
				{EventID: key, Sink: "hook", Body: []byte("{}"), CreatedAt: ended, NextAt: ended}})
			require.NoError(t, err)
			if sent {
				notices, err := store.EpisodeNotices(ctx, db, id)
				require.NoError(t, err)
				require.NoError(t, store.NoticeSent(ctx, st, db, notices[0].ID, ended))
			}
			return id
		}
		gone := []int64{
			episode("a", store.EpisodeResolved, old, true),
			episode("b", store.EpisodeOnce, old, true),
			episode("c", store.EpisodeResolved, old, true),
		}
		unsent := episode("d", store.EpisodeResolved, old, false)
		firing := episode("e", store.EpisodeFiring, old, true)
		later := episode("f", store.EpisodeResolved, recent, true)
		for _, until := range []time.Time{old, recent} {
			_, err := store.AddSilence(ctx, st, db, store.AlertSilence{Rule: "dead", Until: until, CreatedAt: old})
			require.NoError(t, err)
		}

		n, err := store.PruneAlerts(ctx, st, db, cut, 2)
		require.NoError(t, err)
		require.Equal(t, int64(2), n, "a batch stops at its limit")
		n, err = store.PruneAlerts(ctx, st, db, cut, 2)
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		n, err = store.PruneAlerts(ctx, st, db, cut, 2)
		require.NoError(t, err)
		require.Zero(t, n)

		var left []int64
		require.NoError(t, db.Raw("SELECT id FROM sheaf_alert_episodes ORDER BY id").Scan(&left).Error)
		require.Equal(t, []int64{unsent, firing, later}, left)
		for _, id := range gone {
			notices, err := store.EpisodeNotices(ctx, db, id)
			require.NoError(t, err)
			require.Empty(t, notices, "a deleted episode's notices go with it")
		}
		notices, err := store.EpisodeNotices(ctx, db, unsent)
		require.NoError(t, err)
		require.Len(t, notices, 1, "a notice not yet sent is never deleted")
		silences, err := store.Silences(ctx, st, db, time.Time{})
		require.NoError(t, err)
		require.Len(t, silences, 1)
		require.True(t, silences[0].Until.Equal(recent))
	})
}
