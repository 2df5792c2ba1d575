package batch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/batch"
)

func TestMessageConstruction(t *testing.T) {
	t.Parallel()
	d := batch.Data("A", order{ID: 7})
	require.Equal(t, "A", d.BatchID())
	require.Equal(t, order{ID: 7}, d.Item())
	require.False(t, d.IsEnd())
	require.NoError(t, d.Validate())
	require.Equal(t, `data("A")`, d.String())

	e := batch.End[order]("A")
	require.True(t, e.IsEnd())
	require.Zero(t, e.Item(), "an end-of-batch carries no item")
	require.NoError(t, e.Validate())
	require.Equal(t, `end("A")`, e.String())
}

func TestMessageEquality(t *testing.T) {
	t.Parallel()
	require.Equal(t, batch.Data("A", 1), batch.Data("A", 1))
	a, b := batch.Data("A", 1), batch.Data("A", 1)
	require.True(t, a == b, "messages of comparable items are comparable")
	require.False(t, batch.Data("A", 1) == batch.Data("A", 2))
	require.False(t, batch.Data("A", 0) == batch.End[int]("A"), "an end is not a zero item")
	x, y := batch.End[int]("A"), batch.End[int]("A")
	require.True(t, x == y)
}

func TestMessageValidation(t *testing.T) {
	t.Parallel()
	var nilOrder *order
	var nilAny any
	var nilMap map[string]int
	for _, tc := range []struct {
		name string
		err  error // nil: valid
		want string
	}{
		{"zero message", batch.Message[int]{}.Validate(), "batch: invalid message: zero Message; build messages with Data or End"},
		{"empty batch ID", batch.Data("", 1).Validate(), "batch: invalid message: empty batch ID"},
		{"empty batch ID end", batch.End[int]("").Validate(), "batch: invalid message: empty batch ID"},
		{"nil pointer item", batch.Data("A", nilOrder).Validate(), `batch: invalid message for "A": nil item`},
		{"nil interface item", batch.Data("A", nilAny).Validate(), `batch: invalid message for "A": nil item`},
		{"nil map item", batch.Data("A", nilMap).Validate(), `batch: invalid message for "A": nil item`},
		{"interface holding a nil pointer", batch.Data[any]("A", nilOrder).Validate(), `batch: invalid message for "A": nil item`},
		{"interface holding a value", batch.Data[any]("A", 5).Validate(), ""},
		{"nil slice item is an empty item", batch.Data[[]int]("A", nil).Validate(), ""},
		{"zero value item", batch.Data("A", order{}).Validate(), ""},
		{"non-nil pointer", batch.Data("A", &order{}).Validate(), ""},
		{"end of pointer type", batch.End[*order]("A").Validate(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.want == "" {
				require.NoError(t, tc.err)
				return
			}
			require.EqualError(t, tc.err, tc.want)
			require.ErrorIs(t, tc.err, batch.ErrInvalidMessage)
			var me *batch.MessageError
			require.ErrorAs(t, tc.err, &me)
		})
	}
}

func TestSendRejectsInvalidMessagesAndSendsNothing(t *testing.T) {
	t.Parallel()
	c, err := batch.NewCoordinator(batch.ProcessorFunc[*order](func(context.Context, batch.Batch[*order]) error { return nil }), quiet())
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))
	ctx := context.Background()
	require.ErrorIs(t, c.Send(ctx, batch.Data[*order]("A", nil)), batch.ErrInvalidMessage)
	require.ErrorIs(t, c.Send(ctx, batch.Data("", &order{})), batch.ErrInvalidMessage)
	require.ErrorIs(t, c.Send(ctx, batch.Message[*order]{}), batch.ErrInvalidMessage)

	err = c.SendMany(ctx, "A", []*order{{ID: 1}, nil, {ID: 3}})
	require.EqualError(t, err, `batch: invalid message for "A": nil item at index 1`)
	require.ErrorIs(t, c.SendMany(ctx, "", []*order{{ID: 1}}), batch.ErrInvalidMessage)
	require.NoError(t, c.Shutdown(ctx))
	s := c.Stats()
	require.Zero(t, s.ItemsReceived, "a refused send takes nothing, not even part of a slice")
	require.Zero(t, s.BatchesCompleted+s.BatchesIncomplete, "and opens no batch")
}

// FuzzMessageValidation checks that Validate and Send agree, that a message
// is valid exactly when it has a batch ID and, if data, an item, and that a
// refused message takes nothing while an accepted one is taken in.
func FuzzMessageValidation(f *testing.F) {
	f.Add("A", false, false)
	f.Add("", true, false)
	f.Add("ORDER-2025-001", false, true)
	f.Add("\x00", true, true)
	c, err := batch.NewCoordinator(batch.ProcessorFunc[*order](func(context.Context, batch.Batch[*order]) error { return nil }), quiet())
	if err != nil {
		f.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = c.Shutdown(context.Background()) })
	f.Fuzz(func(t *testing.T, id string, end, nilItem bool) {
		var m batch.Message[*order]
		switch {
		case end:
			m = batch.End[*order](id)
		case nilItem:
			m = batch.Data[*order](id, nil)
		default:
			m = batch.Data(id, &order{ID: 1})
		}
		valid := id != "" && (end || !nilItem)
		err := m.Validate()
		require.Equal(t, valid, err == nil, "Validate(%v) = %v", m, err)
		if !valid {
			require.ErrorIs(t, err, batch.ErrInvalidMessage)
		}
		require.Equal(t, id, m.BatchID())
		require.Equal(t, end, m.IsEnd())

		before := c.Stats().ItemsReceived
		sendErr := c.Send(context.Background(), m)
		require.Equal(t, err == nil, sendErr == nil, "Send agrees with Validate")
		taken := c.Stats().ItemsReceived - before
		if valid && !end {
			require.Equal(t, int64(1), taken)
		} else {
			require.Zero(t, taken)
		}
	})
}
