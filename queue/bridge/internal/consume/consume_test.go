package consume_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue/bridge/internal/consume"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

// A loop starts once, Stop cancels and joins it and returns its error
// (not its cancellation), Stop without Start does nothing, and a setup
// that fails starts nothing.
func TestLoop(t *testing.T) {
	t.Parallel()
	var idle consume.Loop
	require.NoError(t, idle.Stop(context.Background()))

	var l consume.Loop
	runs := 0
	ok := func() error { return nil }
	wait := func(ctx context.Context) error { runs++; <-ctx.Done(); return ctx.Err() }
	require.NoError(t, l.Start(context.Background(), ok, wait))
	require.NoError(t, l.Start(context.Background(), ok, wait), "a second Start does nothing")
	require.NoError(t, l.Stop(context.Background()))
	require.NoError(t, l.Stop(context.Background()))
	require.Equal(t, 1, runs)

	boom := errors.New("boom")
	var failing consume.Loop
	require.NoError(t, failing.Start(context.Background(), ok, func(context.Context) error { return boom }))
	require.ErrorIs(t, failing.Stop(context.Background()), boom)

	var unset consume.Loop
	require.ErrorIs(t, unset.Start(context.Background(), func() error { return boom }, wait), boom)
	require.NoError(t, unset.Stop(context.Background()))
}

// Retry tries a failing step again until it succeeds, and gives up when
// the context ends.
func TestRetry(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	tries := 0
	require.NoError(t, consume.Retry(context.Background(), log, "step", func() error {
		if tries++; tries < 2 {
			return errors.New("not yet")
		}
		return nil
	}))
	require.Equal(t, 2, tries)
	ctx, cancel := context.WithCancel(context.Background())
	err := consume.Retry(ctx, log, "step", func() error { cancel(); return errors.New("down") })
	require.ErrorIs(t, err, context.Canceled)
}
