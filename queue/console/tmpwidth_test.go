package console_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sheaf-dev/sheaf/internal/browsertest"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/console"
)

func TestTmpWidth(t *testing.T) {
	e := newEnv(t, console.WithAuthorizer(allowAll))
	e.client.SetLimit(context.Background(), queue.Limit{Scope: queue.ScopeKind, Target: "report", Concurrency: 5, Rate: 100, Per: time.Minute})
	b := browsertest.New(t, 390, 844)
	open(t, b, e, "/limits")
	var out []string
	b.Run(t, chromedp.Evaluate(`[window.innerWidth, document.documentElement.clientWidth, document.documentElement.scrollWidth, ...[...document.querySelectorAll("main, .scroll, table, tr, td, form, section")].map(e => e.tagName + "." + e.className + ":" + e.getBoundingClientRect().left + "-" + e.getBoundingClientRect().right)].map(String)`, &out))
	for _, o := range out {
		t.Log(o)
	}
}
