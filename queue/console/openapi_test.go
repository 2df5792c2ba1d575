package console_test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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

// The document shares its schemas and error responses, declares how
// callers may authenticate, and every reference in it resolves.
func TestOpenAPISharesItsParts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	doc := e.do(t, "GET", "/api/openapi.json", "").json(t)
	comps := doc["components"].(map[string]any)
	schemas := comps["schemas"].(map[string]any)
	for _, name := range []string{"Job", "Attempt", "Queue", "Run", "Review", "Error", "Filter"} {
		require.Contains(t, schemas, name)
	}
	require.Contains(t, comps["securitySchemes"], "bearer")
	job := doc["paths"].(map[string]any)["/api/jobs/{id}"].(map[string]any)["get"].(map[string]any)["responses"].(map[string]any)
	require.Equal(t, map[string]any{"$ref": "#/components/responses/NotFound"}, job["404"])
	retry := doc["paths"].(map[string]any)["/api/jobs/{id}/retry"].(map[string]any)["post"].(map[string]any)["responses"].(map[string]any)
	require.Contains(t, retry, "409")
	// Every reference resolves, and the job is described once.
	raw := string(e.do(t, "GET", "/api/openapi.json", "").body)
	for _, m := range regexp.MustCompile(`"\$ref":"#/components/(schemas|responses)/(\w+)"`).FindAllStringSubmatch(raw, -1) {
		require.Contains(t, comps[m[1]], m[2], m[0])
	}
	require.Equal(t, 1, strings.Count(raw, `"claims":`), "the job's fields appear once, in its schema")
}

// TestOpenAPILints runs the linters CI installs with npm (.ci/run) on the
// document: Redocly's recommended rules and Spectral's spectral:oas, with
// no error and no warning.
func TestOpenAPILints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := t.TempDir()
	doc := filepath.Join(dir, "openapi.json")
	require.NoError(t, os.WriteFile(doc, e.do(t, "GET", "/api/openapi.json", "").body, 0o600))
	ruleset := filepath.Join(dir, ".spectral.json")
	require.NoError(t, os.WriteFile(ruleset, []byte(`{"extends": [["spectral:oas", "recommended"]]}`), 0o600))
	for _, lint := range [][]string{
		{"redocly", "lint", "--format=stylish", doc},
		{"spectral", "lint", "--ruleset", ruleset, "--fail-severity=warn", doc},
	} {
		path, err := exec.LookPath(lint[0])
		if err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed (.ci/run installs it with npm)", lint[0])
			}
			t.Logf("skipped: %s is not installed", lint[0])
			continue
		}
		cmd := exec.Command(path, lint[1:]...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s:\n%s", lint[0], out)
		// Redocly fails on errors only; its warnings are lines of the
		// stylish format.
		require.NotRegexp(t, `\d+:\d+\s+warning`, string(out), "%s:\n%s", lint[0], out)
	}
}
