package console

import (
	"context"
	"net/http"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// nextTicks is how many ticks of each schedule GET /api/schedules lists.
const nextTicks = 5

// pingTimeout bounds the health check's ping.
const pingTimeout = 5 * time.Second

type scheduleView struct {
	Name string `json:"name"`
	// Expression is the cron expression the schedule fires by.
	Expression string `json:"expression"`
	// Zone is the IANA time zone of the expression and of Next.
	Zone string `json:"zone"`
	// Missed is what the schedule does about ticks missed while no runner
	// ran: skip, or run_once.
	Missed string `json:"missed"`
	// Next are its next ticks, in its zone.
	Next []time.Time `json:"next"`
}

type schedulesResponse struct {
	Schedules []scheduleView `json:"schedules"`
}

type kindsResponse struct {
	Kinds []string `json:"kinds"`
}

type statsResponse struct {
	ByStatus           map[queue.Status]int64            `json:"by_status"`
	ByKind             map[string]map[queue.Status]int64 `json:"by_kind"`
	Ready              int64                             `json:"ready"`
	OldestReadySeconds float64                           `json:"oldest_ready_seconds"`
}

type healthResponse struct {
	// Status is "ok", or "unavailable" (with 503) when the database does
	// not answer.
	Status   string         `json:"status"`
	Database databaseHealth `json:"database"`
}

type databaseHealth struct {
	Reachable bool    `json:"reachable"`
	PingMS    float64 `json:"ping_ms"`
	Error     string  `json:"error,omitempty"`
}

func (c *console) infoRoutes() []route {
	return []route{
		{Method: "GET", Pattern: "/api/schedules", Action: ActionRead, Response: schedulesResponse{},
			Summary: "The registered schedules, each with its next five ticks in its time zone.", handle: c.schedules},
		{Method: "GET", Pattern: "/api/kinds", Action: ActionRead, Response: kindsResponse{},
			Summary: "The registered job kinds, which POST /api/jobs accepts.", handle: c.kinds},
		{Method: "GET", Pattern: "/api/stats", Action: ActionRead, Response: statsResponse{},
			Summary: "Jobs counted by status and by kind, and the due jobs waiting (reads the whole table).", handle: c.stats},
		{Method: "GET", Pattern: "/api/health", Action: ActionRead, Response: healthResponse{},
			Statuses: []int{http.StatusOK, http.StatusServiceUnavailable},
			Summary:  "Whether the database answers, and how fast: 200, or 503 when it does not.", handle: c.health},
	}
}

func (c *console) schedules(*http.Request, Access) (int, any, error) {
	out := schedulesResponse{Schedules: []scheduleView{}}
	now := time.Now()
	for _, p := range c.reg.Schedules() {
		v := scheduleView{Name: p.Name, Expression: p.Spec.String(), Zone: p.Location.String(), Missed: "skip", Next: []time.Time{}}
		if p.Missed == queue.RunMissedOnce {
			v.Missed = "run_once"
		}
		for t := now; len(v.Next) < nextTicks; {
			next, err := p.Next(t)
			if err != nil || next.IsZero() {
				break
			}
			v.Next = append(v.Next, next)
			t = next
		}
		out.Schedules = append(out.Schedules, v)
	}
	return http.StatusOK, out, nil
}

func (c *console) kinds(*http.Request, Access) (int, any, error) {
	return http.StatusOK, kindsResponse{Kinds: c.reg.Kinds()}, nil
}

func (c *console) stats(r *http.Request, _ Access) (int, any, error) {
	s, err := c.client.Stats(r.Context())
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, statsResponse{ByStatus: s.ByStatus, ByKind: s.ByKind, Ready: s.Ready,
		OldestReadySeconds: s.OldestReady.Seconds()}, nil
}

func (c *console) health(r *http.Request, _ Access) (int, any, error) {
	ctx, cancel := context.WithTimeout(r.Context(), pingTimeout)
	defer cancel()
	d, err := c.client.Ping(ctx)
	if err != nil {
		return http.StatusServiceUnavailable, healthResponse{Status: "unavailable",
			Database: databaseHealth{Error: err.Error()}}, nil
	}
	return http.StatusOK, healthResponse{Status: "ok",
		Database: databaseHealth{Reachable: true, PingMS: float64(d.Microseconds()) / 1000}}, nil
}
