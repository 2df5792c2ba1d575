// Package browsertest drives a headless Chromium from tests, for the
// console's pages: it starts one browser for a package's tests and gives
// each a tab of its own, accepts the pages' confirmation dialogs (and
// keeps what they asked), and saves screenshots. A package that uses it
// calls Close from its TestMain.
//
// Tests that use it are skipped when no Chromium is installed, but fail
// when the CI variable is set: CI installs it.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// Zone is the time zone the browser runs in: not the server's UTC, so
// that a page that shows times in the viewer's zone can be told from one
// that does not.
const Zone = "America/New_York"

// Browser is one tab of the headless Chromium that the package's tests
// share. Tabs share the browser's cookies, storage and cache, which the
// console's pages do not use; each test serves from a port of its own.
type Browser struct {
	// Ctx runs actions in the tab (chromedp.Run).
	Ctx context.Context

	mu      sync.Mutex
	dialogs []string
	dir     string
}

// find returns the path of a Chromium, or "".
func find() string {
	if p := os.Getenv("SHEAF_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// shared is the Chromium the tests of a package share: starting one per
// test cost each about 1.5 s of a busy machine.
var shared struct {
	sync.Mutex
	ctx         context.Context // its first tab, which keeps it open
	cancel      func()
	err         error
	initialized bool
}

// tempDir is the temporary folder as the process started: tests may point
// TMPDIR at a folder of theirs, and the shared browser outlives them.
var tempDir = os.TempDir()

// browser starts the shared Chromium at path, once.
func browser(path string) (context.Context, error) {
	shared.Lock()
	defer shared.Unlock()
	if shared.initialized {
		return shared.ctx, shared.err
	}
	shared.initialized = true
	// The profile, and Chromium's own temporary files, are in no test's
	// temporary folder: the browser outlives the test that starts it.
	profile, err := os.MkdirTemp(tempDir, "sheaf-chromium-")
	if err != nil {
		shared.err = err
		return nil, err
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile),
		chromedp.Env("TZ="+Zone, "TMPDIR="+profile),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	shared.ctx = ctx
	shared.cancel = func() {
		_ = chromedp.Cancel(ctx) // closes the browser, and waits for it
		cancel()
		cancelAlloc()
		_ = os.RemoveAll(profile)
	}
	if err := chromedp.Run(ctx); err != nil {
		shared.err = fmt.Errorf("browsertest: start %s: %w", path, err)
	}
	return ctx, shared.err
}

// Close closes the shared Chromium, if a test started it. Call it from
// TestMain once the tests have run, before looking for goroutines left
// running.
func Close() {
	shared.Lock()
	defer shared.Unlock()
	if shared.cancel != nil {
		shared.cancel()
	}
	shared.ctx, shared.cancel, shared.err, shared.initialized = nil, nil, nil, false
}

// New opens a tab whose viewport is width by height pixels, closed when
// the test ends. Without Chromium it skips
// the test, or fails it under CI.
func New(t testing.TB, width, height int) *Browser {
	t.Helper()
	path := find()
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("browsertest: no Chromium found (install Debian's chromium package, or set SHEAF_CHROMIUM)")
		}
		t.Skip("browsertest: no Chromium found; install Debian's chromium package to run the browser tests")
	}
	parent, err := browser(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := chromedp.NewContext(parent)
	b := &Browser{Ctx: ctx, dir: t.TempDir()}
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx) // closes the tab
		cancel()
	})
	chromedp.ListenTarget(ctx, func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			b.mu.Lock()
			b.dialogs = append(b.dialogs, d.Message)
			b.mu.Unlock()
			go func() { _ = chromedp.Run(ctx, page.HandleJavaScriptDialog(true)) }()
		}
	})
	// Open the tab now, so that a test's first step is not also its start.
	// The viewport is emulated: a headless window is never narrower than
	// about 500 pixels, whatever its size says.
	if err := chromedp.Run(ctx, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		t.Fatalf("browsertest: open a tab: %v", err)
	}
	return b
}

// Run runs actions in the tab, failing the test on an error; each call
// has a minute.
func (b *Browser) Run(t testing.TB, actions ...chromedp.Action) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, time.Minute)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		t.Fatalf("browsertest: %v", err)
	}
}

// Wait waits, up to a minute, until the JavaScript expression expr is
// true in the tab, across navigations: an evaluation that a navigation
// interrupts is tried again in the page that follows.
func (b *Browser) Wait(t testing.TB, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, time.Minute)
	defer cancel()
	for {
		err := chromedp.Run(ctx, chromedp.Poll(expr, nil, chromedp.WithPollingInterval(50*time.Millisecond)))
		if err == nil {
			return
		}
		if ctx.Err() != nil || !navigated(err) {
			t.Fatalf("browsertest: waiting for %s: %v", expr, err)
		}
	}
}

// navigated reports whether err says the page went away as it was
// evaluated.
func navigated(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "navigated or closed") || strings.Contains(msg, "context was destroyed") ||
		strings.Contains(msg, "Cannot find context")
}

// Dialogs returns the messages of the dialogs the pages opened, which
// were all accepted.
func (b *Browser) Dialogs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.dialogs...)
}

// Screenshot saves the whole page as name.png in the test's temporary
// folder, and also in the folder SHEAF_SCREENSHOTS names, if set; it
// returns the first path.
func (b *Browser) Screenshot(t testing.TB, name string) string {
	t.Helper()
	var png []byte
	b.Run(t, chromedp.FullScreenshot(&png, 100))
	path := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("SHEAF_SCREENSHOTS"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot: %s", path)
	return path
}
