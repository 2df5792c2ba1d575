package gormbatch

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

var errTx = errors.New("the driver's error")

func TestCommitContext(t *testing.T) {
	t.Run("stopped before COMMIT", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		txCtx, commit, done := commitContext(ctx)
		cancel()
		<-txCtx.Done() // follows ctx until COMMIT
		require.False(t, commit(), "roll back instead")
		require.Equal(t, errTx, done(errTx))
	})
	t.Run("stopped during COMMIT", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			txCtx, commit, done := commitContext(ctx)
			require.True(t, commit())
			cancel()
			synctest.Wait()
			require.NoError(t, txCtx.Err(), "a COMMIT sent is not cut short by ctx")
			time.Sleep(commitTimeout - time.Nanosecond) // fake time, inside the bubble
			synctest.Wait()
			require.NoError(t, txCtx.Err())
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			require.ErrorIs(t, context.Cause(txCtx), errCommitTimeout, "but it is bounded")
			err := done(errTx)
			require.ErrorIs(t, err, errCommitTimeout)
			require.ErrorIs(t, err, errTx)
		})
	})
	t.Run("committed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			txCtx, commit, done := commitContext(t.Context())
			require.True(t, commit())
			require.NoError(t, done(nil))
			require.Error(t, txCtx.Err(), "done frees the context")
			time.Sleep(2 * commitTimeout) // the timer was stopped: nothing fires
			synctest.Wait()
			require.NotErrorIs(t, context.Cause(txCtx), errCommitTimeout)
		})
	})
}
