package console

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOperationID(t *testing.T) {
	require.Equal(t, "getJobsById", operationID(route{Method: "GET", Pattern: "/api/jobs/{id}"}))
	require.Equal(t, "postJobsByIdCancel", operationID(route{Method: "POST", Pattern: "/api/jobs/{id}/cancel"}))
	require.Equal(t, "getOpenapiJson", operationID(route{Method: "GET", Pattern: "/api/openapi.json"}))
}
