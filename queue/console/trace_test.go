package console_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue/console"
)

// A job submitted with a traceparent header carries the request's trace
// context, for its attempts to link to; one without, or with a malformed
// header, carries none.
func TestSubmitStoresTraceContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	metadata := func(res response) map[string]string {
		rec, err := e.client.Get(context.Background(), idOf(jobOf(t, res)))
		require.NoError(t, err)
		return rec.Metadata
	}
	res := e.do(t, "POST", "/api/jobs", `{"kind":"report"}`, "traceparent", tp, "tracestate", "congo=t61rcWkgMzE")
	require.Equal(t, map[string]string{"traceparent": tp, "tracestate": "congo=t61rcWkgMzE"}, metadata(res))
	res = e.do(t, "POST", "/api/jobs", `{"kind":"report"}`, "traceparent", "garbage")
	require.Nil(t, metadata(res))
	res = e.do(t, "POST", "/api/jobs", `{"kind":"report"}`)
	require.Nil(t, metadata(res))
}
