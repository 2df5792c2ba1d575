package console

import (
	"context"
	"html/template"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// historyDays is the span GET /api/history covers by default, and the
// overview's chart of days.
const historyDays = 28

var historyParams = []param{
	{Name: "kind", Doc: "Only this kind."},
	{Name: "queue", Doc: "Only this queue."},
	{Name: "from", Format: "date-time", Doc: "The first day: the UTC day of this time. Default 28 days before to."},
	{Name: "to", Format: "date-time", Doc: "The end, exclusive: days before this time. Default now (today included)."},
}

// dayView is one UTC day of a kind on a queue, from the day roll-ups that
// outlive the jobs they count.
type dayView struct {
	// Day is the UTC date, 2006-01-02.
	Day       string `json:"day"`
	Kind      string `json:"kind"`
	Queue     string `json:"queue"`
	Completed int64  `json:"completed"`
	Failed    int64  `json:"failed"`
	Cancelled int64  `json:"cancelled"`
	// Retries counts attempts past the first of the day's jobs.
	Retries int64 `json:"retries"`
	// Run times of the completed jobs, in seconds: median, 95th
	// percentile, longest.
	P50Seconds float64 `json:"p50_seconds"`
	P95Seconds float64 `json:"p95_seconds"`
	MaxSeconds float64 `json:"max_seconds"`
	// Errors counts the failed jobs by the shape of their last error.
	Errors map[string]int64 `json:"errors"`
}

type historyResponse struct {
	Days []dayView `json:"days"`
}

func (c *console) historyRoutes() []route {
	return []route{{Method: "GET", Pattern: "/api/history", Action: ActionRead, Query: historyParams, Response: historyResponse{},
		Summary: "Finished jobs per UTC day, kind and queue: counts by outcome, retries, run times and failures by error; " +
			"kept after the jobs are pruned.", handle: reads(historyParams, c.history)}}
}

func (c *console) history(ctx context.Context, q query) (historyResponse, error) {
	var hq queue.HistoryQuery
	var err error
	if hq.From, err = q.time("from"); err != nil {
		return historyResponse{}, err
	}
	if hq.To, err = q.time("to"); err != nil {
		return historyResponse{}, err
	}
	if hq.To.IsZero() {
		hq.To = time.Now()
	}
	if hq.From.IsZero() {
		hq.From = hq.To.AddDate(0, 0, -historyDays)
	}
	hq.Kind, hq.Queue = q.str("kind"), q.str("queue")
	days, err := c.client.History(ctx, hq)
	if err != nil {
		return historyResponse{}, err
	}
	out := historyResponse{Days: make([]dayView, len(days))}
	for i, d := range days {
		errs := d.Errors
		if errs == nil {
			errs = map[string]int64{}
		}
		out.Days[i] = dayView{Day: d.Day.Format(time.DateOnly), Kind: d.Kind, Queue: d.Queue, Completed: d.Completed,
			Failed: d.Failed, Cancelled: d.Cancelled, Retries: d.Retries, P50Seconds: d.P50.Seconds(),
			P95Seconds: d.P95.Seconds(), MaxSeconds: d.Max.Seconds(), Errors: errs}
	}
	return out, nil
}

// daysChart draws the jobs finished per day over the last historyDays,
// from the day roll-ups, which outlive the jobs.
func (c *console) daysChart(ctx context.Context) (template.HTML, error) {
	days, _, err := c.days.get(ctx, c.cfg.countsTTL*dayTTLs, func(ctx context.Context) ([]queue.DayStats, error) {
		now := time.Now()
		return c.client.History(ctx, queue.HistoryQuery{From: now.AddDate(0, 0, -historyDays+1), To: now})
	})
	if err != nil {
		return "", err
	}
	ch := chart{Title: "Jobs finished per day, last " + num(historyDays) + " days (UTC)",
		Unit: func(v float64) string { return num(int64(v)) }, Days: true}
	ss := []series{{Name: "completed", Class: "completed"}, {Name: "failed", Class: "failed"}}
	for _, d := range days {
		if n := len(ch.Times); n == 0 || !ch.Times[n-1].Equal(d.Day) {
			ch.Times = append(ch.Times, d.Day)
			for i := range ss {
				ss[i].Values = append(ss[i].Values, 0)
			}
		}
		n := len(ch.Times) - 1
		ss[0].Values[n] += float64(d.Completed)
		ss[1].Values[n] += float64(d.Failed)
	}
	return ch.bars(ss), nil
}
