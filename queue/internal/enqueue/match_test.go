package enqueue

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

type rec struct {
	ID  int64
	Key *string
}

func key(r *rec) *string { return r.Key }

func ptr(s string) *string { return &s }

// match runs Match and returns, per row, the record's ID and whether it
// was a duplicate.
func match(rows []store.NewJob, inserted []rec, existing []rec, existingErr error) ([]int64, []bool, []string, error) {
	ids, dups := make([]int64, len(rows)), make([]bool, len(rows))
	var asked []string
	err := Match(rows, inserted, key, func(keys []string) ([]rec, error) {
		asked = keys
		return existing, existingErr
	}, func(i int, r *rec, dup bool) { ids[i], dups[i] = r.ID, dup })
	return ids, dups, asked, err
}

func TestMatchLinesRowsUpInOrder(t *testing.T) {
	t.Parallel()
	rows := []store.NewJob{{}, {Key: ptr("a")}, {}}
	ids, dups, asked, err := match(rows, []rec{{ID: 1}, {ID: 2, Key: ptr("a")}, {ID: 3}}, nil, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3}, ids)
	require.Equal(t, []bool{false, false, false}, dups)
	require.Nil(t, asked, "nothing to read when every key was inserted")
}

func TestMatchReadsDuplicatesAndRepeatedKeys(t *testing.T) {
	t.Parallel()
	// "a" existed before; "b" is inserted by the first of two rows that
	// carry it, so the second is its duplicate.
	rows := []store.NewJob{{Key: ptr("a")}, {Key: ptr("b")}, {Key: ptr("b")}, {}}
	ids, dups, asked, err := match(rows, []rec{{ID: 7, Key: ptr("b")}, {ID: 8}}, []rec{{ID: 5, Key: ptr("a")}}, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{5, 7, 7, 8}, ids)
	require.Equal(t, []bool{true, false, true, false}, dups)
	require.Equal(t, []string{"a", "b"}, asked)
}

func TestMatchFailures(t *testing.T) {
	t.Parallel()
	_, _, _, err := match([]store.NewJob{{}, {}}, []rec{{ID: 1}}, nil, nil)
	require.ErrorIs(t, err, ErrFewer)

	boom := errors.New("boom")
	_, _, _, err = match([]store.NewJob{{Key: ptr("a")}}, nil, nil, boom)
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "read duplicates")

	_, _, _, err = match([]store.NewJob{{Key: ptr("gone")}}, nil, nil, nil)
	require.ErrorContains(t, err, `idempotency key "gone" conflicted but its job is gone; retry`)
}

func TestOverlayAndTraceMetadata(t *testing.T) {
	t.Parallel()
	require.Nil(t, TraceMetadata("", "s"))
	own := TraceMetadata("00-abc-def-01", "k=v")
	rows := []store.NewJob{{Metadata: own}, {}, {}}
	owns := []map[string]string{{"traceparent": "00-abc-def-01", "tracestate": "k=v"}, nil, nil}
	Overlay(rows, func(i int) map[string]string { return owns[i] }, map[string]string{"tracestate": "x", "tenant": "t"})
	got, err := store.DecodeMetadata(rows[0].Metadata)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"traceparent": "00-abc-def-01", "tracestate": "x", "tenant": "t"}, got)
	require.Equal(t, rows[1].Metadata, rows[2].Metadata, "the rows without metadata share one encoding")
	got, err = store.DecodeMetadata(rows[1].Metadata)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"tracestate": "x", "tenant": "t"}, got)
}
