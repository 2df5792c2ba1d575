package console

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/jobview"
)

// chunkRow is one of the latest chunks in the job page's table of chunk
// times.
type chunkRow struct {
	Chunk   int64
	Seconds float64
	Slowest bool // the slowest of those shown
}

// chunkRows lists t's latest chunks, newest first: a job that slowed down
// shows it at the top.
func chunkRows(t *jobview.ChunkTimes) []chunkRow {
	slowest := slowestRecent(t)
	rows := make([]chunkRow, len(t.RecentSeconds))
	for i, s := range t.RecentSeconds {
		rows[len(rows)-1-i] = chunkRow{Chunk: t.FirstRecent + int64(i), Seconds: s, Slowest: i == slowest}
	}
	return rows
}

func slowestRecent(t *jobview.ChunkTimes) int {
	at := 0
	for i, s := range t.RecentSeconds {
		if s > t.RecentSeconds[at] {
			at = i
		}
	}
	return at
}

// Sparkline geometry, in the SVG's own units.
const sparkW, sparkH = 300, 40

// chunkSpark draws t's latest chunks as bars, oldest on the left, on a
// scale from zero to the slowest of them, which is drawn apart.
func chunkSpark(t *jobview.ChunkTimes) template.HTML {
	n := len(t.RecentSeconds)
	slowest := slowestRecent(t)
	top := t.RecentSeconds[slowest]
	title := fmt.Sprintf("Times of chunks %d to %d, oldest on the left: the slowest, chunk %d, took %s",
		t.FirstRecent, t.Count, t.FirstRecent+int64(slowest), dur(seconds(top)))
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="spark" id="chunk-spark" viewBox="0 0 %d %d" role="img" aria-label="%s"><title>%s</title>`,
		sparkW, sparkH, esc(title), esc(title))
	w := float64(sparkW) / float64(n)
	for i, s := range t.RecentSeconds {
		h := float64(sparkH - 2)
		if top > 0 {
			h = max(1, s/top*float64(sparkH-2))
		}
		class := "bar"
		if i == slowest {
			class = "bar slowest"
		}
		fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`,
			class, float64(i)*w+w*0.1, sparkH-h, w*0.8, h)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
