package batch_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/batch"
)

// fill returns a closed channel holding msgs.
func fill[T any](msgs ...batch.Message[T]) chan batch.Message[T] {
	in := make(chan batch.Message[T], len(msgs))
	for _, m := range msgs {
		in <- m
	}
	close(in)
	return in
}

// Consume drains the channel a producer fills and closes, and returns nil:
// every message has been taken in, in the order sent.
func TestConsumeDrainsUntilTheChannelIsClosed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, batch.WithMaxBatchSize(5))
	in := make(chan batch.Message[order])
	go func() {
		defer close(in)
		for _, it := range orders(0, 12) {
			in <- batch.Data("A", it)
			in <- batch.Data("B", it)
		}
		in <- batch.End[order]("A")
		in <- batch.End[order]("B")
	}()
	require.NoError(t, b.c.Consume(context.Background(), in))
	require.Equal(t, int64(24), b.c.Stats().ItemsReceived, "everything is taken in when Consume returns")
	b.shutdown(t)
	for _, id := range []string{"A", "B"} {
		require.Equal(t, batch.Completed, b.outs.one(t, id).Status)
		require.Equal(t, orders(0, 12), b.rec.Items(id))
	}
}

// An invalid message is refused as Send refuses it; Consume stops there and
// leaves the rest in the channel, and a second Consume carries on.
func TestConsumeStopsAtAnInvalidMessage(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	in := fill(
		batch.Data("A", order{ID: 1}),
		batch.Data("", order{ID: 2}),
		batch.Data("A", order{ID: 3}),
		batch.End[order]("A"),
	)
	err := b.c.Consume(context.Background(), in)
	var me *batch.MessageError
	require.ErrorAs(t, err, &me)
	require.EqualError(t, err, "batch: invalid message: empty batch ID")
	require.Len(t, in, 2, "the messages after it stay in the channel")
	require.Equal(t, int64(1), b.c.Stats().ItemsReceived)

	require.NoError(t, b.c.Consume(context.Background(), in))
	b.shutdown(t)
	require.Equal(t, []order{{ID: 1}, {ID: 3}}, b.rec.Items("A"), "the invalid message alone was not sent")
}

// When its context ends, Consume returns an error wrapping the context's
// error, whether it waits for a message or for room, and has received no
// message it did not send.
func TestConsumeStopsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	t.Run("waiting for a message", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setup(t, nil)
			in := make(chan batch.Message[order], 1)
			in <- batch.Data("A", order{ID: 1})
			ctx, cancel := context.WithCancel(context.Background())
			res := make(chan error, 1)
			go func() { res <- b.c.Consume(ctx, in) }()
			synctest.Wait() // Consume has taken the message and waits for the next
			require.Empty(t, in)
			cancel()
			err := <-res
			require.ErrorIs(t, err, context.Canceled)
			require.EqualError(t, err, "batch: consume: context canceled")
			require.Equal(t, int64(1), b.c.Stats().ItemsReceived)
		})
	})
	t.Run("waiting for room", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			c, release, _ := blockingSetup(t)
			in := fill(batch.Data("A", 1), batch.Data("A", 2))
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := c.Consume(ctx, in)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Len(t, in, 1, "the message Consume waited to send is still in the channel")
			require.Equal(t, int64(1), c.Stats().ItemsReceived)
			close(release)
			require.NoError(t, c.Shutdown(context.Background()))
		})
	})
	t.Run("already done", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		in := fill(batch.Data("A", order{}))
		require.ErrorIs(t, b.c.Consume(ctx, in), context.Canceled)
		require.Len(t, in, 1, "a done context wins over a ready message")
	})
}

// Consume fails with ErrNotStarted before Start and ErrClosed after
// Shutdown, taking nothing; a Consume waiting for a message when Shutdown
// begins returns ErrClosed.
func TestConsumeAndTheLifecycle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, err := batch.NewCoordinator(nop[int](), quiet())
		require.NoError(t, err)
		in := make(chan batch.Message[int], 1)
		in <- batch.Data("A", 1)
		require.ErrorIs(t, c.Consume(ctx, in), batch.ErrNotStarted)
		require.Len(t, in, 1)

		require.NoError(t, c.Start(ctx))
		res := make(chan error, 1)
		go func() { res <- c.Consume(ctx, in) }()
		synctest.Wait()
		require.Empty(t, in)
		require.NoError(t, c.Shutdown(ctx))
		require.ErrorIs(t, <-res, batch.ErrClosed, "released by Shutdown, not left waiting")

		in <- batch.Data("A", 2)
		require.ErrorIs(t, c.Consume(ctx, in), batch.ErrClosed)
		require.Len(t, in, 1, "nothing is received after Shutdown")
		require.Equal(t, int64(1), c.Stats().ItemsReceived)
	})
}

// Several Consume calls may drain one channel at once; every message is
// taken in once.
func TestConcurrentConsumes(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, batch.WithMaxBatchSize(7))
	in := make(chan batch.Message[order])
	errs := make(chan error, 4)
	for range cap(errs) {
		go func() { errs <- b.c.Consume(context.Background(), in) }()
	}
	for i := range 1000 {
		in <- batch.Data(fmt.Sprint("B", i%10), order{ID: i})
	}
	close(in)
	for range cap(errs) {
		require.NoError(t, <-errs)
	}
	for i := range 10 {
		require.NoError(t, b.c.Send(context.Background(), batch.End[order](fmt.Sprint("B", i))))
	}
	b.shutdown(t)
	s := b.c.Stats()
	require.Equal(t, int64(1000), s.ItemsReceived)
	require.Equal(t, int64(1000), s.ItemsProcessed)
	require.Equal(t, int64(10), s.BatchesCompleted)
}
