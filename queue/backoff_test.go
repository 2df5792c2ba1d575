package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue/internal/backoff"
)

func TestBackoffStoredWithAJobRoundTrips(t *testing.T) {
	t.Parallel()
	for _, b := range []Backoff{
		Exponential{Base: time.Second, Max: time.Minute, Jitter: 0.1},
		Linear{Step: 2 * time.Second, Max: 10 * time.Second},
		Delays{time.Minute, 5 * time.Minute},
	} {
		data, err := encodeBackoff(b)
		require.NoError(t, err)
		got, err := backoff.Decode(data)
		require.NoError(t, err)
		require.Equal(t, stored(b), got)
	}
	_, err := encodeBackoff(ownBackoff{})
	require.ErrorIs(t, err, ErrInvalidOption)
	for _, bad := range []Backoff{nil, Exponential{}, Exponential{Base: 1, Jitter: 2}, Linear{}, Delays{-time.Second}} {
		require.ErrorIs(t, validBackoff(bad), ErrInvalidOption, "%#v", bad)
	}
}

// ownBackoff is a user's own backoff, which a kind may use but a job cannot
// store.
type ownBackoff struct{}

func (ownBackoff) Delay(int) time.Duration { return time.Second }
