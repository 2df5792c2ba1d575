package console

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
)

func TestNormalise(t *testing.T) {
	for in, want := range map[string]string{
		"job 123 failed after 45ms":                                 "job <n> failed after <n>ms",
		"row 3f2504e0-4f89-11d3-9a0c-0305e82c3301 missing":          "row <uuid> missing",
		"bad pointer 0xc000123abc":                                  "bad pointer <hex>",
		"commit 9fceb02d0ae598e95dc970b74767f19372d61af8 not found": "commit <hex> not found",
		"the request was acceded to":                                "the request was acceded to",
		"deadbeef is a word here, 1deadbeef is not":                 "deadbeef is a word here, <hex> is not",
		"county Travis: upstream returned 503 for request 0x1f":     "county Travis: upstream returned <n> for request <hex>",
		"": "",
	} {
		require.Equal(t, want, normalise(in), in)
	}
}

func TestGroupFailures(t *testing.T) {
	msg := func(s string) *string { return &s }
	groups := groupFailures([]queue.JobRecord{
		{ID: 1, Kind: "b", LastError: msg("timeout after 30s on shard 4")},
		{ID: 2, Kind: "a", LastError: msg("timeout after 31s on shard 7")},
		{ID: 3, Kind: "a", LastError: msg("disk full")},
		{ID: 4, Kind: "a"},
	})
	require.Equal(t, []failureGroup{
		{Message: "timeout after <n>s on shard <n>", Count: 2, Kinds: []string{"a", "b"}, ExampleJobID: 1, JobIDs: []int64{1, 2}},
		{Message: "", Count: 1, Kinds: []string{"a"}, ExampleJobID: 4, JobIDs: []int64{4}},
		{Message: "disk full", Count: 1, Kinds: []string{"a"}, ExampleJobID: 3, JobIDs: []int64{3}},
	}, groups)
}

func TestOperationID(t *testing.T) {
	require.Equal(t, "getJobsById", operationID(route{Method: "GET", Pattern: "/api/jobs/{id}"}))
	require.Equal(t, "postJobsByIdCancel", operationID(route{Method: "POST", Pattern: "/api/jobs/{id}/cancel"}))
	require.Equal(t, "getOpenapiJson", operationID(route{Method: "GET", Pattern: "/api/openapi.json"}))
}
