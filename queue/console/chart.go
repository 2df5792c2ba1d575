package console

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"
)

// The dashboard's charts are SVG drawn here, on the server: no script
// draws them, and a page weighs the same with or without them. Colours
// come from the stylesheet, by class.

// Chart geometry, in the SVG's own units: it scales to its box.
const (
	chartW, chartH = 640, 180
	padL, padR     = 48, 8
	padT, padB     = 22, 22
)

// series is one line, or one layer of bars, of a chart.
type series struct {
	Name, Class string
	Values      []float64
}

// chart is a chart's frame: title, time axis and value axis.
type chart struct {
	Title string
	// Times are the buckets' starts.
	Times []time.Time
	// Unit formats a value of the value axis.
	Unit func(float64) string
	// Days labels the time axis with UTC dates rather than times of day
	// that the browser localises.
	Days bool
}

// label is how the time axis names t.
func (c chart) label(t time.Time) string {
	if c.Days {
		return t.UTC().Format("Jan 2")
	}
	return t.UTC().Format("15:04")
}

// x is the left edge of bucket i; w a bucket's width.
func (c chart) x(i int) float64 { return padL + float64(i)*c.w() }
func (c chart) w() float64 {
	return float64(chartW-padL-padR) / float64(max(len(c.Times), 1))
}

// y is the height of v on a scale whose top is top.
func y(v, top float64) float64 {
	if top <= 0 {
		return chartH - padB
	}
	return chartH - padB - v/top*float64(chartH-padT-padB)
}

// open starts the SVG: its title, the value axis up to top, the time
// axis, and the legend of ss.
func (c chart) open(b *strings.Builder, top float64, ss []series) {
	fmt.Fprintf(b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s"><title>%s</title>`,
		chartW, chartH, esc(c.Title), esc(c.Title))
	fmt.Fprintf(b, `<text class="chart-title" x="%d" y="14">%s</text>`, padL, esc(c.Title))
	for _, v := range []float64{0, top / 2, top} {
		fmt.Fprintf(b, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, padL, chartW-padR, y(v, top), y(v, top))
		fmt.Fprintf(b, `<text class="axis" x="%d" y="%.1f" text-anchor="end">%s</text>`, padL-4, y(v, top)+4, esc(c.Unit(v)))
	}
	if n := len(c.Times); n > 0 {
		for _, i := range []int{0, n / 2, n - 1} {
			anchor := map[bool]string{true: "start", false: "middle"}[i == 0]
			if i == n-1 {
				anchor = "end"
			}
			t := c.Times[i].UTC()
			local := ` data-local="hm"`
			if c.Days {
				local = ""
			}
			fmt.Fprintf(b, `<text class="axis" x="%.1f" y="%d" text-anchor="%s"%s data-datetime="%s">%s</text>`,
				c.x(i)+c.w()/2, chartH-6, anchor, local, t.Format(time.RFC3339), c.label(t))
		}
	}
	lx := float64(chartW - padR)
	for i := len(ss) - 1; i >= 0; i-- {
		lx -= float64(12 + 7*len(ss[i].Name))
		fmt.Fprintf(b, `<rect class="%s" x="%.1f" y="6" width="9" height="9"/><text class="axis" x="%.1f" y="14">%s</text>`,
			ss[i].Class, lx, lx+12, esc(ss[i].Name))
	}
}

// bars draws ss stacked, bucket by bucket; each bucket's bar has a title
// with its values, for a pointer over it.
func (c chart) bars(ss []series) template.HTML {
	var top float64
	for i := range c.Times {
		var sum float64
		for _, s := range ss {
			sum += s.Values[i]
		}
		top = math.Max(top, sum)
	}
	top = niceCeil(top)
	var b strings.Builder
	c.open(&b, top, ss)
	for i, t := range c.Times {
		base := 0.0
		var tip []string
		for _, s := range ss {
			v := s.Values[i]
			tip = append(tip, fmt.Sprintf("%s %s", c.Unit(v), s.Name))
			if v > 0 {
				fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`,
					s.Class, c.x(i)+0.5, y(base+v, top), math.Max(c.w()-1, 0.5), y(base, top)-y(base+v, top))
			}
			base += v
		}
		fmt.Fprintf(&b, `<rect class="hit" x="%.1f" y="%d" width="%.1f" height="%d"><title>%s UTC: %s</title></rect>`,
			c.x(i), padT, c.w(), chartH-padT-padB, c.label(t), esc(strings.Join(tip, ", ")))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// lines draws each of ss as a line through its buckets' middles, with a
// dot on each value (a lone value has no line); a bucket without a value
// (NaN) breaks the line.
func (c chart) lines(ss []series) template.HTML {
	var top float64
	for _, s := range ss {
		for _, v := range s.Values {
			if !math.IsNaN(v) {
				top = math.Max(top, v)
			}
		}
	}
	top = niceCeil(top)
	var b strings.Builder
	c.open(&b, top, ss)
	for _, s := range ss {
		var d strings.Builder
		pen := "M"
		for i, v := range s.Values {
			if math.IsNaN(v) {
				pen = "M"
				continue
			}
			fmt.Fprintf(&d, "%s%.1f %.1f ", pen, c.x(i)+c.w()/2, y(v, top))
			pen = "L"
			fmt.Fprintf(&b, `<circle class="%s" cx="%.1f" cy="%.1f" r="2.5"><title>%s %s</title></circle>`,
				s.Class, c.x(i)+c.w()/2, y(v, top), esc(s.Name), esc(c.Unit(v)))
		}
		if d.Len() > 0 {
			fmt.Fprintf(&b, `<path class="line %s" d="%s"/>`, s.Class, strings.TrimSpace(d.String()))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten, so the axis
// reads in round numbers; at least 1.
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// chainGraph draws a stopped dependency chain: the parents on the left,
// each with its job and status, those that stopped it marked; kinds that
// never ran, dashed; and the child that was not created, on the right.
func chainGraph(s stoppedView) template.HTML {
	type node struct {
		label, class, href string
	}
	var nodes []node
	for _, j := range s.Blocking {
		class := "node"
		if j.Status == "FAILED" || j.Status == "CANCELLED" {
			class = "node stopper"
		}
		nodes = append(nodes, node{label: fmt.Sprintf("%s #%d %s", j.Kind, j.ID, j.Status), class: class,
			href: fmt.Sprintf("jobs/%d", j.ID)})
	}
	for _, k := range s.MissingKinds {
		nodes = append(nodes, node{label: k + " (never created)", class: "node missing"})
	}
	const rowH, boxW, boxH = 34, 230, 24
	h := max(len(nodes), 1)*rowH + 12
	var b strings.Builder
	title := fmt.Sprintf("Rule %s stopped: %s was not created", s.Rule, s.ChildKind)
	fmt.Fprintf(&b, `<svg class="chain" viewBox="0 0 560 %d" role="img" aria-label="%s"><title>%s</title>`, h, esc(title), esc(title))
	cy := float64(h) / 2
	for i, n := range nodes {
		ny := float64(6 + i*rowH)
		fmt.Fprintf(&b, `<path class="edge" d="M%d %.1f C%d %.1f %d %.1f %d %.1f"/>`,
			boxW+6, ny+boxH/2, boxW+80, ny+boxH/2, 300, cy, 330, cy)
		if n.href != "" {
			fmt.Fprintf(&b, `<a href="%s">`, n.href)
		}
		fmt.Fprintf(&b, `<rect class="%s" x="6" y="%.1f" width="%d" height="%d" rx="4"/><text x="14" y="%.1f">%s</text>`,
			n.class, ny, boxW, boxH, ny+16, esc(n.label))
		if n.href != "" {
			b.WriteString(`</a>`)
		}
	}
	fmt.Fprintf(&b, `<rect class="node pending" x="330" y="%.1f" width="220" height="%d" rx="4"/><text x="338" y="%.1f">%s (not created)</text>`,
		cy-boxH/2, boxH, cy+4, esc(s.ChildKind))
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func esc(s string) string { return template.HTMLEscapeString(s) }
