package console_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/browsertest"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/console"
)

// axeScript is axe-core's script, from SHEAF_AXE or npm's global modules
// (.ci/run installs it there).
var axeScript = sync.OnceValues(func() (string, error) {
	path := os.Getenv("SHEAF_AXE")
	if path == "" {
		root, err := exec.Command("npm", "root", "-g").Output()
		if err != nil {
			return "", fmt.Errorf("npm root -g: %w", err)
		}
		path = filepath.Join(strings.TrimSpace(string(root)), "axe-core", "axe.min.js")
	}
	b, err := os.ReadFile(path)
	return string(b), err
})

// axe returns the serious and critical accessibility violations axe-core
// finds on the page b shows: by the WCAG 2.1 AA and best-practice rules,
// or by the rules named.
func axe(t *testing.T, b *browsertest.Browser, rules ...string) []string {
	t.Helper()
	src, err := axeScript()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("axe-core: %v (npm install -g axe-core)", err)
		}
		t.Skipf("axe-core is not installed (npm install -g axe-core): %v", err)
	}
	only := `{type: "tag", values: ["wcag2a", "wcag2aa", "wcag21aa", "best-practice"]}`
	if len(rules) > 0 {
		only = `{type: "rule", values: ` + jsonBody(t, rules) + `}`
	}
	var out []string
	b.Run(t, chromedp.Evaluate(src, nil), chromedp.Evaluate(`axe.run(document, {resultTypes: ["violations"], runOnly: `+only+`}).then(r => r.violations
		.filter(v => v.impact === "serious" || v.impact === "critical")
		.map(v => v.id + " (" + v.impact + "): " + v.nodes.slice(0, 3).map(n => n.target.join(" ")).join(", ")))`, &out,
		func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	return out
}

// Every page, in the light theme and the dark, has no serious or critical
// accessibility violation, and serves its favicon.
func TestBrowserPagesAreAccessible(t *testing.T) {
	t.Parallel()
	e := newEnv(t, console.WithAuthorizer(allowAll))
	const run = "nightly@2025-12-08T23:00:00Z"
	bad := e.enqueue(t, report{County: "El Paso", Fail: true}, queue.InRun(run))
	ok := e.enqueue(t, report{County: "Travis"}, queue.InRun(run))
	e.work(t, bad, ok)
	e.do(t, "POST", "/api/queues/default/pause", "")
	e.do(t, "POST", "/api/limits", `{"scope":"kind","target":"report","concurrency":5,"rate":100,"per_seconds":60}`)
	pages := []string{"/", "/jobs", fmt.Sprintf("/jobs/%d", bad), "/runs", "/runs/" + run, "/schedules", "/audit", "/limits", "/nowhere"}

	b := browsertest.New(t, desktopW, desktopH)
	for _, scheme := range []string{"light", "dark"} {
		b.Run(t, emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}))
		// The dark theme changes colours and nothing else (app.css), so
		// it is checked by the rules that read colours: each axe run
		// costs the browser about a second of CPU.
		var rules []string
		if scheme == "dark" {
			rules = []string{"color-contrast", "link-in-text-block"}
		}
		for _, p := range pages {
			open(t, b, e, p)
			require.Empty(t, axe(t, b, rules...), "%s, %s theme", p, scheme)
		}
	}
	open(t, b, e, "/")
	b.Screenshot(t, "overview-dark")

	body := e.page(t, "/", http.StatusOK)
	icon := regexp.MustCompile(`<link rel="icon" type="image/svg\+xml" href="(assets/favicon\.svg\?v=[0-9a-f]+)">`).FindStringSubmatch(body)
	require.Len(t, icon, 2)
	res := e.do(t, "GET", "/"+icon[1], "")
	require.Equal(t, http.StatusOK, res.status)
	require.Equal(t, "image/svg+xml", res.header.Get("Content-Type"))
}
