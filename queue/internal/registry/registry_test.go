package registry

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue/internal/calendar"
	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/runner"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

type opts struct{ window calendar.Window }

type sched struct{ t runner.Timing }

func (s *sched) Timing() *runner.Timing { return &s.t }

type args struct {
	N int `json:"n"`
}

type other struct{}

func newRegistry() *Registry[opts, func(), func(), *sched] {
	return New[opts, func(), func(), *sched](func(o opts) calendar.Window { return o.window })
}

func TestKindsLookupAndAdd(t *testing.T) {
	t.Parallel()
	r := newRegistry()
	require.NoError(t, r.Add(NewKind[args]("b", false, opts{}, func() {})))
	require.NoError(t, r.Add(NewKind[other]("a", true, opts{}, func() {})))
	require.ErrorIs(t, r.Add(NewKind[args]("a", false, opts{}, func() {})), check.ErrInvalidOption)
	require.Equal(t, []string{"a", "b"}, r.Kinds())

	unknown := errors.New("unknown")
	_, err := r.Lookup("c", unknown)
	require.ErrorIs(t, err, unknown)
	require.ErrorContains(t, err, `"c" (registered: [a b])`)
	k, err := r.Lookup("b", unknown)
	require.NoError(t, err)
	require.False(t, k.Chunked)

	b, err := k.Encode(args{N: 1})
	require.NoError(t, err)
	require.JSONEq(t, `{"n":1}`, string(b))
	_, err = k.Encode(other{})
	require.ErrorIs(t, err, check.ErrInvalidPayload)
	require.NoError(t, k.CheckPayload([]byte(`{"n":2}`)))
	require.ErrorIs(t, k.CheckPayload([]byte(`{"n":"x"}`)), check.ErrInvalidPayload)
	require.ErrorIs(t, k.CheckPayload([]byte(`{"n":2,"s":"\u0000"}`)), check.ErrInvalidPayload)
}

func TestAddRuleChecksKinds(t *testing.T) {
	t.Parallel()
	r := newRegistry()
	require.NoError(t, r.Add(NewKind[args]("parent", false, opts{}, func() {})))
	require.NoError(t, r.Add(NewKind[other]("child", false, opts{}, func() {})))
	rule := func(name, parent, child string) *runner.Registered[func()] {
		return &runner.Registered[func()]{Dependency: runner.Dependency{Rule: runner.Rule{Name: name, Parents: []string{parent}}, ChildKind: child}}
	}
	tOther, tArgs := NewKind[other]("", false, opts{}, func() {}).ArgsType, NewKind[args]("", false, opts{}, func() {}).ArgsType
	require.ErrorContains(t, r.AddRule(rule("r", "parent", "child"), tArgs), `child kind "child" is not registered with`)
	require.ErrorContains(t, r.AddRule(rule("r", "nobody", "child"), tOther), `parent kind "nobody" is not registered`)
	require.NoError(t, r.AddRule(rule("r", "parent", "child"), tOther))
	require.ErrorIs(t, r.AddRule(rule("r", "parent", "child"), tOther), check.ErrInvalidOption, "name taken")
	require.ErrorContains(t, r.AddRule(rule("back", "child", "parent"), tArgs), "cycle")
	require.Len(t, r.RulesFor("parent"), 1)
	require.Empty(t, r.RulesFor("child"))
	require.NotNil(t, r.Rule("r"))
	require.Nil(t, r.Rule("back"))
}

func TestWindows(t *testing.T) {
	t.Parallel()
	night, err := calendar.DailyWindow("23:00", "05:00", time.UTC)
	require.NoError(t, err)
	r := newRegistry()
	require.NoError(t, r.Add(NewKind[args]("k", false, opts{window: night}, func() {})))
	require.NoError(t, r.Add(NewKind[other]("open", false, opts{}, func() {})))
	r.SetQueueWindow("q", night)
	r.SetQueueWindow("always", calendar.Window{})
	noon := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

	w, ok := r.ClosedWindow("open", "q", noon)
	require.True(t, ok, "the queue's window")
	require.Equal(t, night.String(), w.String())
	_, ok = r.ClosedWindow("k", "other", noon)
	require.True(t, ok, "the kind's window")
	_, ok = r.ClosedWindow("open", "other", noon)
	require.False(t, ok)
	_, ok = r.ClosedWindow("k", "q", noon.Add(12*time.Hour))
	require.False(t, ok, "both open at midnight")

	require.Equal(t, []WindowRule{{Queue: "q", Window: night}, {Kind: "k", Window: night}}, r.Windows())
	closed, kinds := r.Closed(noon, []string{"q", "other"})
	require.Equal(t, map[string]bool{"q": true}, closed)
	require.Equal(t, []string{"k"}, kinds)
	require.Equal(t, time.Date(2026, 1, 1, 23, 0, 0, 0, time.UTC), r.NextOpening(noon, []string{"other"}))
}

func TestCheckRule(t *testing.T) {
	t.Parallel()
	require.NoError(t, CheckRule("r", 2, false, false))
	require.NoError(t, CheckRule("r", 1, true, false))
	require.ErrorIs(t, CheckRule("", 1, false, false), check.ErrInvalidOption)
	require.ErrorContains(t, CheckRule("r", 1, false, true), "nil child function")
	require.ErrorContains(t, CheckRule("r", 0, false, false), "needs parent kinds")
	require.ErrorContains(t, CheckRule("r", 2, true, false), "exactly one")
}
