package maintain

import (
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const day = 24 * time.Hour

func TestRulesPutKindsOverridesFirst(t *testing.T) {
	t.Parallel()
	r := Retention[struct{}]{Keep: Durations{Failed: Forever}, Default: Durations{Completed: 7 * day, Cancelled: 30 * day, Failed: 30 * day},
		Kinds: maps.All(map[string]Durations{
			"b":    {Completed: 2 * day, Failed: Forever}, // Failed is the client's already
			"a":    {Cancelled: time.Hour},
			"same": {}, // keeps the client's
		})}
	require.Equal(t, []Keep{
		{Kind: "a", Status: "CANCELLED", For: time.Hour},
		{Kind: "b", Status: "COMPLETED", For: 2 * day},
		{Status: "COMPLETED", For: 7 * day},
		{Status: "CANCELLED", For: 30 * day},
		{Status: "FAILED", For: Forever, Forever: true},
	}, r.rules())
}

func TestFlaw(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind                bool
		d                   Durations
		history, hours      time.Duration
		alerts              time.Duration
		archive             bool
		field, reasonPrefix string
	}{
		{d: Durations{Completed: Forever, Failed: time.Hour}, history: day, alerts: 7 * day},
		{d: Durations{Cancelled: time.Minute}, field: "Cancelled", reasonPrefix: "is neither KeepForever nor at least 1h0m0s"},
		{alerts: day, field: "Alerts", reasonPrefix: "is neither KeepForever nor at least 168h0m0s"},
		{kind: true, history: day, field: "History", reasonPrefix: "is the client's"},
		{hours: time.Second, field: "HourlyHistory", reasonPrefix: "is neither KeepForever nor at least 1h0m0s"},
		{kind: true, hours: day, field: "HourlyHistory", reasonPrefix: "is the client's"},
		{kind: true, alerts: Forever, field: "Alerts", reasonPrefix: "is the client's"},
		{kind: true, archive: true, field: "Archive", reasonPrefix: "is the client's"},
		{archive: true},
	} {
		field, _, reason := Flaw(tc.kind, tc.d, tc.history, tc.hours, tc.alerts, tc.archive, time.Hour, 7*day)
		require.Equal(t, tc.field, field, "%+v", tc)
		if tc.reasonPrefix == "" {
			require.Empty(t, reason)
		} else {
			require.Contains(t, reason, tc.reasonPrefix)
		}
	}
}
