package main

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/readme"
	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

// The README's first engine program prints what the README says it does.
func TestProgram(t *testing.T) {
	out := readme.Run(t, main)
	require.Contains(t, out, `REFUNDS: failed: batch "REFUNDS": sub-batch 3: order 250: negative amount`)
	require.Contains(t, out, "SALES: completed, 1000 items")
	require.Contains(t, out, "REFUNDS: deleting what it wrote")
}
