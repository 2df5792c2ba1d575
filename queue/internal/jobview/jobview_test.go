package jobview

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

func TestOfDerivesTimesAndHidesClaims(t *testing.T) {
	t.Parallel()
	runAt := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	started, done := runAt.Add(1500*time.Millisecond), runAt.Add(4*time.Second)
	rec := &queue.JobRecord{ID: 7, Kind: "k", Status: queue.StatusCompleted, RunAt: runAt, StartedAt: &started,
		CompletedAt: &done, Auth: queue.Auth{"ssn": "123-45-6789"}, Payload: json.RawMessage(`{"a":1}`)}
	v := Of(rec, rec.Payload)
	require.InDelta(t, 1.5, *v.WaitSeconds, 1e-9)
	require.InDelta(t, 2.5, *v.RunSeconds, 1e-9)
	require.Equal(t, []int64{}, v.ParentIDs, "an empty list, not null")
	b, err := json.Marshal(v)
	require.NoError(t, err)
	require.NotContains(t, string(b), "123-45-6789")
	require.Contains(t, string(b), `"args":{"a":1}`)

	queued := Of(&queue.JobRecord{RunAt: runAt}, json.RawMessage("not json"))
	require.Nil(t, queued.WaitSeconds)
	require.Nil(t, queued.RunSeconds)
	require.JSONEq(t, "null", string(queued.Args))

	early := started.Add(-time.Hour) // started before its run time: a RunNow, say
	require.Nil(t, Of(&queue.JobRecord{RunAt: runAt, StartedAt: &early}, nil).WaitSeconds)

	all := All([]queue.JobRecord{*rec, {ID: 8, Kind: "j"}}, func(kind string, _ json.RawMessage) json.RawMessage {
		return json.RawMessage(`"` + kind + `"`)
	})
	require.Equal(t, []json.RawMessage{json.RawMessage(`"k"`), json.RawMessage(`"j"`)}, []json.RawMessage{all[0].Args, all[1].Args})
}

func TestAttempts(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	got := Attempts([]queue.Attempt{{Number: 1, Runner: "r", StartedAt: at, FinishedAt: &at, Outcome: "failed", Error: "boom"}, {Number: 2}})
	require.Equal(t, at, *got[0].StartedAt)
	require.Equal(t, "boom", got[0].Error)
	require.Nil(t, got[1].StartedAt, "claimed, not started")
	require.Nil(t, got[1].FinishedAt)
}

// Chunk times are shown in seconds, with the number of the first chunk
// kept; a job with no chunk timed shows none.
func TestSetChunkTimes(t *testing.T) {
	t.Parallel()
	var p Progress
	p.SetChunkTimes(queue.ChunkTimes{})
	require.Nil(t, p.ChunkTimes)
	p.SetChunkTimes(queue.ChunkTimes{Count: 60, Min: time.Second, Max: 4 * time.Second, Sum: 120 * time.Second,
		Recent: []time.Duration{3 * time.Second, 4 * time.Second}})
	require.Equal(t, &ChunkTimes{Count: 60, MinSeconds: 1, MaxSeconds: 4, MeanSeconds: 2,
		RecentSeconds: []float64{3, 4}, FirstRecent: 59}, p.ChunkTimes)
	require.Equal(t, 4.0, p.ChunkTimes.Latest())
}
