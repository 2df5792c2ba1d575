package pgtest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
)

// A proxy with a delay makes every round trip of the connections it
// accepts afterwards at least that much slower, and carries them whole.
func TestProxyDelaysRoundTrips(t *testing.T) {
	pgtest.PostgresOnly(t, "the proxy stands in front of a PostgreSQL server")
	t.Parallel()
	db := pgtest.New(t)
	p := pgtest.NewProxy(t, db)
	const rtt = 80 * time.Millisecond
	p.Delay(rtt)
	far, err := pgtest.OpenDSN(p.DSN(db.DSN))
	require.NoError(t, err)
	sqlDB, err := far.DB()
	require.NoError(t, err)
	t.Cleanup(func() { _ = sqlDB.Close() })
	sqlDB.SetMaxOpenConns(1)
	require.NoError(t, sqlDB.Ping()) // the connection's setup, not timed
	var s string
	began := time.Now()
	// A result of many chunks, as the proxy reads them.
	require.NoError(t, sqlDB.QueryRow("SELECT string_agg(i::text || repeat('x', 95), '') FROM generate_series(10000, 11999) i").Scan(&s))
	require.GreaterOrEqual(t, time.Since(began), rtt)
	require.Len(t, s, 2000*100)
	require.Equal(t, "10000"+strings.Repeat("x", 95)+"10001", s[:105], "in order")
	require.Equal(t, "11999"+strings.Repeat("x", 95), s[len(s)-100:])
}
