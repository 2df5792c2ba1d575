package bridge

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The relay's own encoding of an event is json.Marshal's, byte for byte,
// whatever the strings hold.
func FuzzCloudEventJSON(f *testing.F) {
	f.Add("report", "default", "", "", "", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", int64(42), 1, int64(1700000000123456789))
	f.Add("r\u00e9sum\u00e9", "q<&>", "line\nbreak \"quoted\" \\ tab\t", "c\u2028", "\xff\xfe", "", int64(-1), -3, int64(0))
	f.Add("k", "q", "\x00\x1f\x7f", "corr", "run", "rojo=00f067aa0ba902b7", int64(1)<<62, 1<<30, int64(-1))
	f.Fuzz(func(t *testing.T, kind, queue, errText, corr, run, trace string, job int64, attempt int, at int64) {
		ce := CloudEvent{SpecVersion: "1.0", ID: "17", Source: queue, Type: Completed.Type(), Subject: kind,
			Time: time.Unix(0, at).UTC(), DataContentType: "application/json", TraceParent: trace, TraceState: corr,
			Data: Data{JobID: job, Kind: kind, Queue: queue, Attempt: attempt, MaxAttempts: -attempt, Error: errText,
				CorrelationID: corr, RunID: run}}
		want, err := json.Marshal(ce)
		require.NoError(t, err)
		require.Equal(t, string(want), string(ce.appendJSON(nil)))
		want, err = json.Marshal(ce.Data)
		require.NoError(t, err)
		require.Equal(t, string(want), string(ce.Data.appendJSON(nil)))
	})
}
