package backoff

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

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
		{Linear{Step: 24 * time.Hour}, 1 << 20, Longest},             // likewise
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

func TestStoredRoundTrips(t *testing.T) {
	t.Parallel()
	for _, b := range []Backoff{
		Exponential{Base: time.Second, Max: time.Minute, Jitter: 0.1},
		Linear{Step: 2 * time.Second, Max: 10 * time.Second},
		Delays{time.Minute, 5 * time.Minute},
	} {
		data, err := Encode(b)
		require.NoError(t, err)
		got, err := Decode(data)
		require.NoError(t, err)
		require.Equal(t, b, got)
	}
	data, err := Encode(Delays{})
	require.NoError(t, err)
	none, err := Decode(data)
	require.NoError(t, err)
	require.Zero(t, none.Delay(1), "an empty Delays still waits nothing")
	data, err = Encode(Exponential{Base: time.Second, Max: time.Minute})
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"exponential","base":1000000000,"max":60000000000}`, string(data), "the form stored with jobs stays")
	_, err = Encode(nil)
	require.ErrorIs(t, err, ErrNotStored)
	_, err = Decode([]byte(`{"type":"fibonacci"}`))
	require.EqualError(t, err, `queue: unknown stored backoff "fibonacci"`)
	_, err = Decode([]byte(`not json`))
	require.Error(t, err)
}

func TestFlaw(t *testing.T) {
	t.Parallel()
	for b, want := range map[any]string{
		nil:                             "nil backoff",
		Exponential{}:                   "exponential backoff needs Base > 0, Max >= 0 and Jitter in [0, 1]: {Base:0s Max:0s Jitter:0}",
		Exponential{Base: 1, Jitter: 2}: "exponential backoff needs Base > 0, Max >= 0 and Jitter in [0, 1]: {Base:1ns Max:0s Jitter:2}",
		Exponential{Base: 1, Max: -1}:   "exponential backoff needs Base > 0, Max >= 0 and Jitter in [0, 1]: {Base:1ns Max:-1ns Jitter:0}",
		Linear{}:                        "linear backoff needs Step > 0 and Max >= 0: {Step:0s Max:0s}",
		Exponential{Base: 1, Jitter: 1}: "",
		Linear{Step: time.Second}:       "",
		struct{}{}:                      "", // the user's own: not checked
	} {
		require.Equal(t, want, Flaw(b), "%#v", b)
	}
	require.Equal(t, "delays backoff has a negative delay: [1m0s -1s]", Flaw(Delays{time.Minute, -time.Second}))
	require.Empty(t, Flaw(Delays{}))
}
