package limit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		scope      string
		conc, rate int
		per        time.Duration
		fair       bool
		weights    map[string]int
		ok         bool
	}{
		{conc: 1, ok: true},
		{rate: 5, per: time.Second, ok: true},
		{conc: 2, rate: 5, per: time.Millisecond, ok: true},
		{scope: "key", fair: true, ok: true},
		{scope: "key", conc: 3, fair: true, ok: true},
		{scope: "key", fair: true, weights: map[string]int{"acme": 3, "": 1, "big": MaxWeight}, ok: true},
		{scope: "key", fair: true, weights: map[string]int{"acme": 0}},
		{scope: "key", fair: true, weights: map[string]int{"acme": MaxWeight + 1}},
		{scope: "key", fair: true, weights: map[string]int{"bad\x00key": 2}},
		{scope: "key", conc: 3, weights: map[string]int{"acme": 2}},
		{},
		{conc: -1},
		{rate: 5, per: time.Microsecond},
		{conc: 1, per: time.Second},
		{scope: "kind", conc: 1, fair: true},
	} {
		if c.scope == "" {
			c.scope = "kind"
		}
		err := Check(store.Limit{Scope: c.scope, Concurrency: c.conc, Rate: c.rate, Period: c.per, Fair: c.fair, Weights: c.weights})
		if c.ok {
			require.NoError(t, err, "%+v", c)
		} else {
			require.ErrorIs(t, err, check.ErrInvalidOption, "%+v", c)
		}
	}
}

func TestUseString(t *testing.T) {
	u := Use{Scope: "key", Target: "mail", Key: "acme", Concurrency: 2, Rate: 10, Per: time.Minute, Running: 2, Started: 3}
	require.True(t, u.Reached())
	require.Equal(t, `limit key mail key "acme" reached (2 of 2 running, 3 of 10 started in 1m)`, u.String())
	u.Suspended = true
	require.False(t, u.Reached())
	require.Equal(t, `limit key mail key "acme" suspended (2 of 2 running, 3 of 10 started in 1m)`, u.String())
}

func TestKeyOf(t *testing.T) {
	_, err := KeyOf[struct{}](nil)
	require.ErrorIs(t, err, check.ErrInvalidOption)
	k, err := KeyOf(func(a struct{ Tenant string }) string { return a.Tenant })
	require.NoError(t, err)
	got, err := k.Of([]byte(`{"Tenant":"acme"}`))
	require.NoError(t, err)
	require.Equal(t, "acme", *got)
	_, err = k.Of([]byte(`[`))
	require.ErrorIs(t, err, check.ErrInvalidPayload)
	none, err := Key(nil).Of([]byte(`{}`))
	require.NoError(t, err)
	require.Nil(t, none)
}

func TestPeriodReadsAsSaid(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Minute: "1m", time.Hour: "1h", 90 * time.Minute: "1h30m", 90 * time.Second: "1m30s",
		30 * time.Second: "30s", 24 * time.Hour: "24h", 500 * time.Millisecond: "500ms",
	} {
		require.Equal(t, want, period(d), d)
	}
}
