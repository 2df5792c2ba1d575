// Package browsertest drives a headless Chromium from tests, for the
// console's pages: it starts one browser per test binary (close it with
// Main), opens a window for each test, accepts the pages' confirmation
// dialogs (and keeps what they asked), and saves screenshots.
//
// Tests that use it are skipped when no Chromium is installed, but fail
// when the CI variable is set: CI installs Debian's chromium-headless-shell.
package browsertest

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// Zone is the time zone the browser runs in: not the server's UTC, so
// that a page that shows times in the viewer's zone can be told from one
// that does not.
const Zone = "America/New_York"

// Browser is a test's window in the shared headless Chromium.
type Browser struct {
	// Ctx runs actions in the tab (chromedp.Run).
	Ctx context.Context

	mu      sync.Mutex
	dialogs []string
	dir     string
}

// find returns the path of a Chromium, or "". The headless shell comes
// first: it draws the same pages for about half the CPU time of the full
// browser's headless mode, which counts on a loaded machine.
func find() string {
	if p := os.Getenv("SHEAF_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium-headless-shell", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// shared is the test binary's one Chromium, started by the first New and
// closed as Main's run ends: starting one costs a couple of seconds of
// CPU, which a browser per test would pay again and again.
var shared struct {
	main   bool // Main wraps the binary's run, and will close the browser
	once   sync.Once
	ctx    context.Context // the browser's first tab, which keeps it open
	cancel func()
	err    error
}

// tmpRoot is the temporary folder as the process started, before any
// test points TMPDIR elsewhere.
var tmpRoot = os.TempDir()

// start starts the shared browser.
func start(path string) {
	// The profile is not in a test's TempDir, nor where a test may have
	// pointed TMPDIR: the browser outlives the test that starts it. It is
	// Chromium's TMPDIR too, so that closing the browser removes all it
	// made.
	profile, err := os.MkdirTemp(tmpRoot, "sheaf-chromium-")
	if err != nil {
		shared.err = err
		return
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
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithErrorf(quietErrorf))
	shared.ctx = ctx
	shared.cancel = func() {
		_ = chromedp.Cancel(ctx) // closes the browser, and waits for it
		cancel()
		cancelAlloc()
		_ = os.RemoveAll(profile)
	}
	if err := chromedp.Run(ctx); err != nil {
		shared.err = fmt.Errorf("start %s: %w", path, err)
	}
}

// Main wraps a test binary's run: it closes the shared browser once the
// tests have run, before goleak, say, looks for goroutines left behind:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(browsertest.Main(m)) }
func Main(m M) M {
	shared.main = true
	return closer{m}
}

// M is what runs a test binary's tests: testing.M, or goleak's TestingM.
type M interface{ Run() int }

type closer struct{ m M }

func (c closer) Run() int {
	code := c.m.Run()
	if shared.cancel != nil {
		shared.cancel()
	}
	return code
}

// newWindow opens a window in a browser context of its own, and returns
// the function that closes both.
func newWindow() (target.ID, func(), error) {
	ctx := cdp.WithExecutor(shared.ctx, chromedp.FromContext(shared.ctx).Browser)
	bc, err := target.CreateBrowserContext().Do(ctx)
	if err != nil {
		return "", nil, err
	}
	dispose := func() { _ = target.DisposeBrowserContext(bc).Do(ctx) } // closes its windows too
	id, err := target.CreateTarget("about:blank").WithBrowserContextID(bc).WithNewWindow(true).Do(ctx)
	if err != nil {
		dispose()
		return "", nil, err
	}
	return id, dispose, nil
}

// quietErrorf logs chromedp's errors but for the DOM events it does not
// know, such as a modal dialog's top layer changing: they are not errors
// of the page.
func quietErrorf(format string, args ...any) {
	if strings.HasPrefix(format, "unhandled node event") {
		return
	}
	log.Printf("ERROR: "+format, args...)
}

// New opens a window of width by height pixels, in a browser context of
// its own (no cookies or storage shared with other tests' windows), closed
// when the test ends. Without Chromium it skips the test, or fails it
// under CI. Each test has a window, not a tab: a tab behind another one
// is hidden, and pages pause their refresh while hidden.
func New(t testing.TB, width, height int) *Browser {
	t.Helper()
	path := find()
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("browsertest: no Chromium found (install Debian's chromium-headless-shell package, or set SHEAF_CHROMIUM)")
		}
		t.Skip("browsertest: no Chromium found; install Debian's chromium-headless-shell package to run the browser tests")
	}
	if !shared.main {
		t.Fatal("browsertest: wrap the test binary's run in browsertest.Main, which closes the browser")
	}
	shared.once.Do(func() { start(path) })
	if shared.err != nil {
		t.Fatalf("browsertest: %v", shared.err)
	}
	dir := t.TempDir()
	id, dispose, err := newWindow()
	if err != nil {
		t.Fatalf("browsertest: open a window: %v", err)
	}
	ctx, cancel := chromedp.NewContext(shared.ctx, chromedp.WithTargetID(id))
	b := &Browser{Ctx: ctx, dir: dir}
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx) // closes the window
		cancel()
		dispose()
	})
	chromedp.ListenTarget(ctx, func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			b.mu.Lock()
			b.dialogs = append(b.dialogs, d.Message)
			b.mu.Unlock()
			go func() { _ = chromedp.Run(ctx, page.HandleJavaScriptDialog(true)) }()
		}
	})
	// The viewport is emulated: a headless window is never narrower than
	// about 500 pixels, whatever its size says.
	var state string
	if err := chromedp.Run(ctx, chromedp.EmulateViewport(int64(width), int64(height)),
		chromedp.Evaluate(`document.visibilityState`, &state)); err != nil {
		t.Fatalf("browsertest: open a window: %v", err)
	}
	if state != "visible" {
		t.Fatalf("browsertest: the test's window is %s, and its pages would pause", state)
	}
	return b
}

// SpeedUpTimers makes the pages the tab loads from now on run their
// setInterval timers factor times as often: for a test that waits on a
// page's periodic refresh, whose period is not what it tests.
func (b *Browser) SpeedUpTimers(t testing.TB, factor int) {
	t.Helper()
	b.Run(t, chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := page.AddScriptToEvaluateOnNewDocument(fmt.Sprintf(`(() => {
			const every = window.setInterval;
			window.setInterval = (f, ms, ...args) => every(f, (ms || 0) / %d, ...args);
		})()`, factor)).Do(ctx)
		return err
	}))
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

// Type types text, as keys, into the field that the CSS selector sel
// selects, having focused it from the page's script. Unlike
// chromedp.SendKeys it keeps no reference to the field's node, which a
// page that refreshes itself may replace meanwhile: the keys go to the
// focused field, so the page must move the focus to the replacement.
func Type(sel, text string) chromedp.Action {
	return chromedp.Tasks{
		whenVisible(sel, `e.focus(); return document.activeElement === e;`),
		chromedp.KeyEvent(text),
	}
}

// Click clicks what the CSS selector sel selects from the page's script,
// once it is visible: unlike chromedp.Click it does not find the node
// first and click it after, by which time a page that refreshes itself
// may have replaced it.
func Click(sel string) chromedp.Action {
	return whenVisible(sel, `e.click(); return true;`)
}

// whenVisible runs do, a function's body of the element e that sel
// selects, once e is visible, in the same evaluation as it finds e; it
// tries again until do returns true.
func whenVisible(sel, do string) chromedp.Action {
	return chromedp.Poll(`(() => { const e = document.querySelector(`+strconv.Quote(sel)+`);
		if (!e || !e.checkVisibility()) return false; `+do+` })()`, nil,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(0))
}

// Wait waits, up to a minute, until the JavaScript expression expr is
// true in the tab, across navigations: an evaluation that a navigation
// interrupts is tried again in the page that follows. If it fails, the
// test's log has the page's text.
func (b *Browser) Wait(t testing.TB, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, time.Minute)
	defer cancel()
	for {
		// No timeout of the poll's own (30 s by default): ctx's minute.
		err := chromedp.Run(ctx, chromedp.Poll(expr, nil, chromedp.WithPollingInterval(50*time.Millisecond),
			chromedp.WithPollingTimeout(0)))
		if err == nil {
			return
		}
		if ctx.Err() != nil || !navigated(err) {
			b.logText(t)
			t.Fatalf("browsertest: waiting for %s: %v", expr, err)
		}
	}
}

// logText logs the text of the tab's page, for a test that failed on it.
func (b *Browser) logText(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 10*time.Second)
	defer cancel()
	var text string
	if err := chromedp.Run(ctx, chromedp.Evaluate(`document.body ? document.body.innerText : ""`, &text)); err != nil {
		t.Logf("browsertest: the page's text could not be read: %v", err)
		return
	}
	t.Logf("browsertest: the page's text:\n%s", text)
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
	return b.screenshot(t, name, "document.documentElement.scrollHeight")
}

// ScreenshotWindow saves what the window shows of the page, its first
// screen, as Screenshot saves the whole page: a phone's long page is a
// picture too tall to look at whole.
func (b *Browser) ScreenshotWindow(t testing.TB, name string) string {
	t.Helper()
	return b.screenshot(t, name, "window.innerHeight")
}

// screenshot saves the page down to height (a script's expression).
func (b *Browser) screenshot(t testing.TB, name, height string) string {
	t.Helper()
	var png []byte
	// As wide as the window: without the scrollbar, as a phone draws the
	// page, and clipped to the page's size as laid out then (a capture
	// left to size itself is as wide as the page was with its scrollbar,
	// and cuts off the right edge of what is laid out without).
	var size []float64
	b.Run(t, emulation.SetScrollbarsHidden(true),
		chromedp.Evaluate(`[Math.max(window.innerWidth, document.documentElement.scrollWidth), `+height+`]`, &size),
		chromedp.ActionFunc(func(ctx context.Context) (err error) {
			png, err = page.CaptureScreenshot().WithCaptureBeyondViewport(true).WithFromSurface(true).
				WithClip(&page.Viewport{Width: size[0], Height: size[1], Scale: 1}).Do(ctx)
			return err
		}),
		emulation.SetScrollbarsHidden(false))
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
