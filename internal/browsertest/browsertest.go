// Package browsertest drives a headless Chromium from tests, for the
// console's pages: it starts the browser, accepts the pages' confirmation
// dialogs (and keeps what they asked), and saves screenshots.
//
// Tests that use it are skipped when no Chromium is installed, but fail
// when the CI variable is set: CI installs it.
package browsertest

import (
	"context"
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

// Browser is one headless Chromium with one tab.
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

// New starts a browser whose window is width by height pixels, closed
// when the test ends. Without Chromium it skips the test, or fails it
// under CI.
func New(t testing.TB, width, height int) *Browser {
	t.Helper()
	path := find()
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("browsertest: no Chromium found (install Debian's chromium package, or set SHEAF_CHROMIUM)")
		}
		t.Skip("browsertest: no Chromium found; install Debian's chromium package to run the browser tests")
	}
	// The profile is not in t.TempDir: Chromium's helpers may still be
	// writing to it as the test's own clean-up runs.
	profile, err := os.MkdirTemp("", "sheaf-chromium-")
	if err != nil {
		t.Fatal(err)
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
		chromedp.WindowSize(width, height),
		chromedp.Env("TZ=" + Zone),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	b := &Browser{Ctx: ctx, dir: t.TempDir()}
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx) // closes the browser, and waits for it
		cancel()
		cancelAlloc()
		_ = os.RemoveAll(profile)
	})
	chromedp.ListenTarget(ctx, func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			b.mu.Lock()
			b.dialogs = append(b.dialogs, d.Message)
			b.mu.Unlock()
			go func() { _ = chromedp.Run(ctx, page.HandleJavaScriptDialog(true)) }()
		}
	})
	// Start the browser now, so that a test's first step is not also the
	// browser's start.
	// The viewport is emulated: a headless window is never narrower than
	// about 500 pixels, whatever its size says.
	if err := chromedp.Run(ctx, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		t.Fatalf("browsertest: start %s: %v", path, err)
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
