package operate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

type status string

func TestSelectChecksAndConverts(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := Filter[status]{Kinds: []string{"k"}, Statuses: []status{"FAILED"}, Queue: "q", Search: "x", CreatedAfter: at,
		AfterID: 3, BeforeID: 9, Newest: true, Limit: 7}.Select()
	require.NoError(t, s.err)
	require.Equal(t, 7, s.limit)
	require.Equal(t, store.Filter{Kinds: []string{"k"}, Statuses: []string{"FAILED"}, Queue: "q", Search: "x",
		CreatedAfter: at, AfterID: 3, BeforeID: 9, Newest: true}, s.filter)
	f, err := s.unpaged()
	require.NoError(t, err)
	require.Zero(t, f.AfterID+f.BeforeID)
	require.False(t, f.Newest)

	for _, bad := range []Filter[status]{{Queue: "a\x00"}, {Kinds: []string{"\xff"}}, {Statuses: []status{"\x00"}}} {
		_, err := bad.Select().unpaged()
		require.ErrorIs(t, err, check.ErrInvalidOption, "%+v", bad)
	}
	_, err = Filter[status]{Statuses: []status{"\x00"}}.Select().unpaged()
	require.ErrorContains(t, err, "Filter.Statuses[0]")
}
