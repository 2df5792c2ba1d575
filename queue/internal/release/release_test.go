package release

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

// The hooks' metadata goes over the child's own, later hooks over earlier
// ones; without any, the child keeps its own, untouched.
func TestOverlay(t *testing.T) {
	child := store.NewJob{Metadata: store.EncodeMetadata(map[string]string{"traceparent": "own", "keep": "k"})}
	own := child.Metadata
	overlay(&child, []map[string]string{nil, {}})
	require.Equal(t, own, child.Metadata)

	overlay(&child, []map[string]string{{"traceparent": "first", "a": "1"}, {"traceparent": "second"}})
	got, err := store.DecodeMetadata(child.Metadata)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"traceparent": "second", "keep": "k", "a": "1"}, got)

	bare := store.NewJob{}
	overlay(&bare, []map[string]string{{"a": "1"}})
	got, err = store.DecodeMetadata(bare.Metadata)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a": "1"}, got)
}
