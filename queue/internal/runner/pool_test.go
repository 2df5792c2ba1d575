package runner

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPoolAdvice(t *testing.T) {
	t.Parallel()
	advice, need := PoolAdvice(0, 100, 50)
	require.Contains(t, advice, "no limit on open connections, so handlers that each take one may need 104")
	require.Contains(t, advice, "the server accepts 50 more")
	require.Contains(t, advice, "call SetMaxOpenConns")
	require.Equal(t, 50, need, "as many idle as the server can open")

	advice, need = PoolAdvice(0, 100, 2)
	require.Contains(t, advice, "the server accepts 2 more")
	require.Equal(t, Conns, need, "never fewer than the runner's own")

	advice, need = PoolAdvice(40, 100, 50)
	require.Empty(t, advice, "a limit on open connections")
	require.Equal(t, 40, need)

	advice, need = PoolAdvice(0, 10, 50)
	require.Empty(t, advice, "the server has room")
	require.Equal(t, 14, need)
}
