package console

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
)

func TestOperationID(t *testing.T) {
	require.Equal(t, "getJobsById", operationID(route{Method: "GET", Pattern: "/api/jobs/{id}"}))
	require.Equal(t, "postJobsByIdCancel", operationID(route{Method: "POST", Pattern: "/api/jobs/{id}/cancel"}))
	require.Equal(t, "getOpenapiJson", operationID(route{Method: "GET", Pattern: "/api/openapi.json"}))
}

func TestChainWaits(t *testing.T) {
	q, p, f := queue.StatusQueued, queue.StatusProcessing, queue.StatusFailed
	for _, c := range []struct {
		missing  []string
		statuses []queue.Status
		want     bool
	}{
		{nil, []queue.Status{q}, true},
		{nil, []queue.Status{q, p}, true},
		{nil, []queue.Status{q, f}, false},
		{nil, []queue.Status{queue.StatusCancelled}, false},
		{[]string{"report"}, []queue.Status{q}, false},
		{nil, nil, false}, // every parent completed: the rule failed to build it
	} {
		require.Equal(t, c.want, chainWaits(c.missing, c.statuses), "%v %v", c.missing, c.statuses)
	}
}

func TestSearchOf(t *testing.T) {
	for in, want := range map[string]string{
		"permanent: county <n>: upstream returned <n> for request <hex>": ": upstream returned",
		"the feed is offline":   "the feed is offline",
		"<n>":                   "",
		"row <uuid> is missing": "is missing",
	} {
		require.Equal(t, want, searchOf(in), in)
	}
}

func TestErrText(t *testing.T) {
	s := "permanent: read <b>: context deadline exceeded"
	got := string(errText(&s))
	require.Contains(t, got, `data-tag="permanent">permanent</span>`)
	require.Contains(t, got, `data-tag="timeout">timed out</span>`)
	require.True(t, strings.HasSuffix(got, "read &lt;b&gt;: context deadline exceeded"), got)
	require.Equal(t, "upstream said no", string(errText("upstream said no")))
	require.Empty(t, string(errText((*string)(nil))))
}

func TestRelWords(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		57*time.Minute + 20*time.Second: "in 57 min",
		-3 * time.Hour:                  "3 h ago",
		10 * time.Second:                "in a moment",
		-10 * time.Second:               "just now",
		-50 * time.Hour:                 "2 days ago",
		100 * time.Minute:               "in 2 h",
	} {
		require.Equal(t, want, relWords(now.Add(d), now), d)
	}
	require.Equal(t, "1 job", plural(1, "job", "jobs"))
	require.Equal(t, "1,204 jobs", plural(int64(1204), "job", "jobs"))
	require.Equal(t, "0 jobs", plural(0, "job", "jobs"))
}

// A schedule's day is its own: 00:30 in Kolkata is already tomorrow
// there while it is still today in UTC.
func TestDayWords(t *testing.T) {
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	require.NoError(t, err)
	now := time.Date(2026, 11, 27, 17, 0, 0, 0, time.UTC) // 22:30 in Kolkata
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{time.Date(2026, 11, 27, 23, 0, 0, 0, kolkata), "today 23:00"},
		{time.Date(2026, 11, 28, 0, 30, 0, 0, kolkata), "tomorrow 00:30"},
		{time.Date(2026, 11, 28, 23, 0, 0, 0, kolkata), "tomorrow 23:00"},
		{time.Date(2026, 12, 1, 23, 0, 0, 0, kolkata), "Tue 1 Dec 23:00"},
		{time.Date(2027, 1, 4, 6, 0, 0, 0, kolkata), "Mon 4 Jan 2027 06:00"},
	} {
		require.Equal(t, c.want, dayWords(c.at, now), c.at)
	}
}
