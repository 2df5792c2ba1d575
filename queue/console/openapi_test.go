package console_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue/console"
)

// TestOpenAPIDocumentsEveryRoute checks both ways: every path and method
// the document lists is served (answered with something other than the
// no-route errors), and every route the mux registers is in the document.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	res := e.do(t, "GET", "/api/openapi.json", "")
	require.Equal(t, http.StatusOK, res.status)
	doc := res.json(t)
	require.Equal(t, "3.0.3", doc["openapi"])
	paths := doc["paths"].(map[string]any)
	wildcard := regexp.MustCompile(`\{\w+\}`)
	documented := map[string]bool{}
	for path, ops := range paths {
		for method, op := range ops.(map[string]any) {
			documented[strings.ToUpper(method)+" "+path] = true
			o := op.(map[string]any)
			require.NotEmpty(t, o["summary"], path)
			require.NotEmpty(t, o["operationId"], path)
			require.NotEmpty(t, o["x-sheaf-action"], path)
			concrete := wildcard.ReplaceAllString(path, "1")
			res := e.do(t, strings.ToUpper(method), concrete, "{}")
			if res.status >= 400 {
				code := res.errCode(t)
				require.NotContains(t, []string{"no_route", "method_not_allowed"}, code, "%s %s is documented but not served", method, path)
			}
		}
	}
	// Every route the mux registers is documented, and nothing else.
	h, err := console.New(e.client, console.WithLogger(quiet()))
	require.NoError(t, err)
	registered := map[string]bool{}
	for _, r := range console.Routes(h) {
		registered[r] = true
	}
	require.Equal(t, registered, documented)
	require.True(t, registered["GET /api/openapi.json"])
}
