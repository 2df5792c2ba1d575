package enqueue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

type ctxKey struct{}

// hk is a hook set as queue's Hooks: an enqueue function that sets the
// call's metadata, or none.
type hk struct {
	enqueue func(ctx context.Context) (context.Context, func(int))
}

func TestHookedThreadsTheContextAndStoresTheMetadata(t *testing.T) {
	t.Parallel()
	var meta map[string]string
	var got []int
	hooks := []hk{{}, {enqueue: func(ctx context.Context) (context.Context, func(int)) {
		meta = map[string]string{"tenant": "t"}
		return context.WithValue(ctx, ctxKey{}, "v"), func(r int) { got = append(got, r) }
	}}}
	rows := []store.NewJob{{}, {}}
	pick := func(h hk) func(context.Context) (context.Context, func(int)) { return h.enqueue }
	ctx, done := Hooked(context.Background(), hooks, pick, rows, func(int) map[string]string { return nil },
		func() map[string]string { return meta })
	require.Equal(t, "v", ctx.Value(ctxKey{}))
	done(3)
	require.Equal(t, []int{3}, got)
	m, err := store.DecodeMetadata(rows[1].Metadata)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"tenant": "t"}, m)

	rows = []store.NewJob{{}}
	_, done = Hooked(context.Background(), []hk{{}}, pick, rows, nil, func() map[string]string { return nil })
	done(1) // a no-op, never nil
	require.Nil(t, rows[0].Metadata)
}
