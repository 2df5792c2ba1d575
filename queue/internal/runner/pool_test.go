package runner

import (
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPoolAdvice(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("pgx", "postgres://nobody@127.0.0.1:1/none") // never connects
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })

	advice := PoolAdvice(db, 100, 50)
	require.Contains(t, advice, "no limit on open connections")
	require.Contains(t, advice, "the server accepts 50 more")
	require.Contains(t, advice, "SetMaxIdleConns(50)")

	db.SetMaxOpenConns(40)
	advice = PoolAdvice(db, 100, 50)
	require.NotContains(t, advice, "no limit")
	require.Contains(t, advice, "SetMaxIdleConns(40)")

	db.SetMaxIdleConns(40)
	require.Empty(t, PoolAdvice(db, 100, 50))
	n, known := maxIdleConns(db)
	require.True(t, known)
	require.Equal(t, 40, n)
}
