package hook

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

type ctxKey struct{}

type hooks struct {
	name string
	call bool
}

func TestChainThreadsTheContextAndEndsInReverse(t *testing.T) {
	t.Parallel()
	var ended []string
	ctx, end := Chain(context.Background(), []hooks{{"a", true}, {"b", false}, {"c", true}},
		func(h hooks) func(context.Context) (context.Context, func(int)) {
			if !h.call {
				return nil
			}
			return func(ctx context.Context) (context.Context, func(int)) {
				prev, _ := ctx.Value(ctxKey{}).(string)
				return context.WithValue(ctx, ctxKey{}, prev+h.name), func(e int) { ended = append(ended, h.name) }
			}
		})
	require.Equal(t, "ac", ctx.Value(ctxKey{}))
	end(1)
	require.Equal(t, []string{"c", "a"}, ended)

	_, end = Chain(context.Background(), []hooks{{"a", false}}, func(hooks) func(context.Context) (context.Context, func(int)) { return nil })
	require.Nil(t, end, "no end without hooks that returned one")
}

func TestFanoutContainsPanics(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var got []int
	observe := Fanout(slog.New(slog.NewTextHandler(&buf, nil)), []func(int){
		func(int) { panic("observer bug") },
		func(e int) { got = append(got, e) },
	})
	observe(7)
	require.Equal(t, []int{7}, got, "the observer after a panicking one still sees the event")
	require.Contains(t, buf.String(), "queue: observer panicked")
}
