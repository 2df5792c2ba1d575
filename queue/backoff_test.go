package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBackoffDelays(t *testing.T) {
	t.Parallel()
	exp := Exponential{Base: time.Second, Max: 10 * time.Second}
	lin := Linear{Step: time.Second, Max: 3 * time.Second}
	seed := Delays{time.Minute, 5 * time.Minute, 15 * time.Minute}
	for _, tc := range []struct {
		b       Backoff
		attempt int
		want    time.Duration
	}{
		{exp, 1, time.Second}, {exp, 2, 2 * time.Second}, {exp, 4, 8 * time.Second},
		{exp, 5, 10 * time.Second}, {exp, 60, 10 * time.Second}, // capped, no overflow
		{Exponential{Base: time.Second}, 10, 512 * time.Second},      // no cap
		{Exponential{Base: time.Second}, 1 << 20, time.Second << 32}, // no cap, and no overflow: it stops doubling
		{Linear{Step: 24 * time.Hour}, 1 << 20, longest},             // likewise
		{lin, 1, time.Second}, {lin, 2, 2 * time.Second}, {lin, 9, 3 * time.Second},
		{seed, 1, time.Minute}, {seed, 2, 5 * time.Minute}, {seed, 3, 15 * time.Minute}, {seed, 7, 15 * time.Minute},
		{Delays{}, 3, 0},
	} {
		require.Equal(t, tc.want, tc.b.Delay(tc.attempt), "%#v attempt %d", tc.b, tc.attempt)
	}
}

func TestJitterStaysWithinItsBounds(t *testing.T) {
	t.Parallel()
	b := Exponential{Base: 10 * time.Second, Jitter: 0.2}
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := b.Delay(1)
		require.GreaterOrEqual(t, d, 8*time.Second)
		require.LessOrEqual(t, d, 12*time.Second)
		seen[d] = true
	}
	require.Greater(t, len(seen), 10, "jitter spreads retries")
}

func TestBackoffStoredWithAJobRoundTrips(t *testing.T) {
	t.Parallel()
	for _, b := range []Backoff{
		Exponential{Base: time.Second, Max: time.Minute, Jitter: 0.1},
		Linear{Step: 2 * time.Second, Max: 10 * time.Second},
		Delays{time.Minute, 5 * time.Minute},
	} {
		data, err := encodeBackoff(b)
		require.NoError(t, err)
		got, err := decodeBackoff(data)
		require.NoError(t, err)
		require.Equal(t, b, got)
	}
	_, err := decodeBackoff([]byte(`{"type":"fibonacci"}`))
	require.ErrorContains(t, err, "unknown stored backoff")
	for _, bad := range []Backoff{nil, Exponential{}, Exponential{Base: 1, Jitter: 2}, Linear{}, Delays{-time.Second}} {
		require.ErrorIs(t, validBackoff(bad), ErrInvalidOption, "%#v", bad)
	}
}
