package pgtest

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStatTicks(t *testing.T) {
	// A command name with spaces and a parenthesis, as postgres's
	// backends' names have ("postgres: user db 127.0.0.1(5432) idle").
	stat := "42 (postgres: p test 127.0.0.1(4) idle) S 1 2 3 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 1 0 99 0 0"
	n, err := statTicks([]byte(stat))
	require.NoError(t, err)
	require.Equal(t, uint64(12), n)

	_, err = statTicks([]byte("42 postgres S 1"))
	require.ErrorContains(t, err, "no command name")
	_, err = statTicks([]byte("42 (x) S 1 2 3"))
	require.ErrorContains(t, err, "fields after the command name")
	_, err = statTicks([]byte("42 (x) S 1 2 3 0 -1 4194560 100 0 0 0 7 -5 0"))
	require.Error(t, err)
}

func TestProcCPU(t *testing.T) {
	_, err := procCPU(os.Getpid(), 0.01)
	require.NoError(t, err)
	_, err = procCPU(1<<30, 0.01) // above Linux's largest pid
	require.True(t, os.IsNotExist(err), "%v", err)
}
