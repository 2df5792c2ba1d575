package operate

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

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

	// The deadline passed, and a dial bounded by it failed, before the
	// context's timer closed Done.
	late := pastDeadline{context.Background()}
	require.NoError(t, late.Err())
	err = interrupted(late, timeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
}

// pastDeadline is a context whose deadline has passed but that is not done
// yet, as a context.WithTimeout is until its timer fires.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }
