package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// templateFuncs are the functions the dashboard's templates call.
var templateFuncs = template.FuncMap{
	"when":       when,
	"rel":        rel,
	"errText":    errText,
	"target":     auditTarget,
	"reason":     reasonOf,
	"plural":     plural,
	"zoned":      zoned,
	"secs":       secs,
	"chunkRows":  chunkRows,
	"chunkSpark": chunkSpark,
	"took":       took,
	"clock":      clock,
	"dur":        dur,
	"num":        num,
	"link":       link,
	"pretty":     pretty,
	"deref":      deref,
	"percent":    percent,
	"lower":      strings.ToLower,
	"hasPrefix":  strings.HasPrefix,
	"next":       func(n int) int { return n + 1 },
	"pathesc":    url.PathEscape,
	"deref64": func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	},
	"ratio": func(a, b float64) string {
		if b <= 0 {
			return "—"
		}
		return strconv.FormatFloat(a/b, 'f', 1, 64)
	},
	"runFilter": func(run string) retryRequest { return retryRequest{Filter: &filterBody{Run: run}} },
	"statuses":  func() []queue.Status { return queue.Statuses() },
	"count":     func(m map[queue.Status]int64, s queue.Status) int64 { return m[s] },
	"jsonAttr": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
	"has": slices.Contains[[]string],
}

// when shows a time (time.Time or *time.Time) as a <time> element: in UTC
// as the server writes it, which the page's script shows in the viewer's
// zone, naming the zone. A nil or zero time is a dash.
func when(v any) template.HTML {
	t := timeOf(v)
	if t.IsZero() {
		return "—"
	}
	u := t.UTC()
	return template.HTML(`<time datetime="` + u.Format(time.RFC3339Nano) + `" data-local>` + u.Format("2006-01-02 15:04:05") + ` UTC</time>`)
}

// clock shows a time of day (time.Time or *time.Time) as a <time>
// element, "01:12", which the page's script shows in the viewer's zone;
// its title holds the whole time.
func clock(v any) template.HTML {
	t := timeOf(v)
	if t.IsZero() {
		return "—"
	}
	u := t.UTC()
	return template.HTML(`<time datetime="` + u.Format(time.RFC3339Nano) + `" data-local="hm">` + u.Format("15:04") + ` UTC</time>`)
}

// took says a wall time in words, to the minute from a minute on:
// "45 s", "12 min", "2 h 10 min", "1 day 3 h".
func took(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Round(time.Second).Seconds())) + " s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Round(time.Minute).Minutes())) + " min"
	case d < 24*time.Hour:
		d = d.Round(time.Minute)
		h, m := int(d.Hours()), int(d.Minutes())%60
		if m == 0 {
			return strconv.Itoa(h) + " h"
		}
		return fmt.Sprintf("%d h %d min", h, m)
	}
	d = d.Round(time.Hour)
	days, h := int(d.Hours())/24, int(d.Hours())%24
	s := plural(days, "day", "days")
	if h > 0 {
		s += " " + strconv.Itoa(h) + " h"
	}
	return s
}

// rel shows a time relative to now ("in 57 min", "3 h ago") as a <time>
// element whose title holds the absolute time: the page's script keeps
// the words current and puts the title in the viewer's zone. A nil or zero
// time is a dash.
func rel(v any) template.HTML {
	t := timeOf(v)
	if t.IsZero() {
		return "—"
	}
	u := t.UTC()
	return template.HTML(`<time datetime="` + u.Format(time.RFC3339Nano) + `" data-rel title="` +
		u.Format("2006-01-02 15:04:05") + ` UTC">` + relWords(t, time.Now()) + `</time>`)
}

// relWords says how far t is from now, as app.js's relWords does.
func relWords(t, now time.Time) string {
	d := t.Sub(now)
	ahead := d > 0
	d = d.Abs()
	var s string
	switch {
	case d < 45*time.Second:
		if ahead {
			return "in a moment"
		}
		return "just now"
	case d < 90*time.Minute:
		s = strconv.Itoa(int(math.Round(d.Minutes()))) + " min"
	case d < 36*time.Hour:
		s = strconv.Itoa(int(math.Round(d.Hours()))) + " h"
	default:
		s = strconv.Itoa(int(math.Round(d.Hours()/24))) + " days"
	}
	if ahead {
		return "in " + s
	}
	return s + " ago"
}

// errText shows an error message (string or *string) with what it is
// known to mean as tags before it: a permanent error (the "permanent: "
// prefix, which it takes off) and a time-out.
func errText(v any) template.HTML {
	msg, _ := v.(string)
	if p, ok := v.(*string); ok && p != nil {
		msg = *p
	}
	var b strings.Builder
	if rest, ok := strings.CutPrefix(msg, "permanent: "); ok {
		b.WriteString(`<span class="badge tag" data-tag="permanent">permanent</span> `)
		msg = rest
	}
	if m := strings.ToLower(msg); strings.Contains(m, "timed out") || strings.Contains(m, "deadline exceeded") {
		b.WriteString(`<span class="badge tag" data-tag="timeout">timed out</span> `)
	}
	b.WriteString(template.HTMLEscapeString(msg))
	return template.HTML(b.String())
}

// plural counts n things: "1 job", "1,204 jobs".
func plural(n any, one, many string) string {
	var k int64
	switch x := n.(type) {
	case int:
		k = int64(x)
	case int64:
		k = x
	}
	if k == 1 {
		return "1 " + one
	}
	return num(k) + " " + many
}

// timeOf is a time.Time, or what a *time.Time points to; zero otherwise.
func timeOf(v any) time.Time {
	switch x := v.(type) {
	case time.Time:
		return x
	case *time.Time:
		if x != nil {
			return *x
		}
	}
	return time.Time{}
}

// zoned shows a time in its own zone, naming it: a schedule's ticks are
// read on the schedule's clock, not the viewer's.
func zoned(v any) string {
	t := timeOf(v)
	if t.IsZero() {
		return "—"
	}
	return t.Format("Mon 2006-01-02 15:04 MST")
}

// secs shows a number of seconds (float64 or *float64) as a duration.
func secs(v any) string {
	switch x := v.(type) {
	case float64:
		return dur(time.Duration(x * float64(time.Second)))
	case *float64:
		if x != nil {
			return dur(time.Duration(*x * float64(time.Second)))
		}
	}
	return "—"
}

// dur shows a duration briefly: 850ms, 4.2s, 3m04s, 2h05m, 3d4h.
func dur(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + dur(-d)
	case d == 0:
		return "0s"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// num shows a count with thousands separated: 1,234,567.
func num(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// link builds a relative URL: the path, then the query of the pairs of
// kv whose values are not empty.
func link(p string, kv ...any) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		k := fmt.Sprint(kv[i])
		switch v := kv[i+1].(type) {
		case []string:
			for _, s := range v {
				q.Add(k, s)
			}
		default:
			if s := fmt.Sprint(v); s != "" {
				q.Set(k, s)
			}
		}
	}
	if len(q) == 0 {
		return p
	}
	return p + "?" + q.Encode()
}

// pretty indents JSON for reading.
func pretty(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// percent is part of whole, in whole percent from 0 to 100.
func percent(part int64, whole *int64) int64 {
	if whole == nil || *whole <= 0 {
		return 0
	}
	return min(max(part*100 / *whole, 0), 100)
}
