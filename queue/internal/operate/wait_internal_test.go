package operate

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// A statement cut short by the caller's deadline may fail with the
// driver's own timeout; Wait's error still says the deadline passed, and
// keeps the driver's error beside it. An error while the context is live
// is returned as it is.
func TestInterruptedSaysTheContextEnded(t *testing.T) {
	timeout := &os.PathError{Op: "write", Path: "tcp", Err: os.ErrDeadlineExceeded}
	require.Same(t, error(timeout), interrupted(context.Background(), timeout))

	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	err := interrupted(ctx, timeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)

	already := errors.Join(context.DeadlineExceeded)
	require.Same(t, already, interrupted(ctx, already), "an error that says so already is left alone")
}
