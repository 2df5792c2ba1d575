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
	// MissedPolicy is what the schedule does about ticks missed while no
	// runner ran: skip, or run_once.
	MissedPolicy string `json:"missed_policy"`
	// LastTick is the latest tick a runner fired, in the schedule's zone;
	// absent if none has fired.
	LastTick *time.Time `json:"last_tick,omitempty"`
	// Started is, for a schedule a runner has started but that has not
	// fired yet, when it was started, in the schedule's zone.
	Started *time.Time `json:"started,omitempty"`
	// Missed counts the ticks after LastTick that were due more than a
	// minute ago and did not fire; MissedLatest is the latest of them.
	Missed       int        `json:"missed"`
	MissedLatest *time.Time `json:"missed_latest,omitempty"`
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
	// AsOf is when the counts were read: they are reused for a few
	// seconds (console.WithCountsCache).
	AsOf time.Time `json:"as_of"`
}

type healthResponse struct {
	// Status is "ok", or "unavailable" (with 503) when the database does
	// not answer.
	Status   string         `json:"status"`
	Database databaseHealth `json:"database"`
	// Schema is the version of the database's schema, and the one this
	// build migrates to; absent when the database does not answer.
	Schema *schemaHealth `json:"schema,omitempty"`
	// RecentRunners counts the runners seen within the last minute
	// (GET /api/runners lists them); absent when the database does not
	// answer.
	RecentRunners *int `json:"recent_runners,omitempty"`
}

type schemaHealth struct {
	// Version is 0 when the database was never migrated.
	Version int `json:"version"`
	Latest  int `json:"latest"`
}

var runnerParams = []param{
	{Name: "within", Doc: "Runners seen within this long, as a Go duration (90s, 5m, 24h): 1s to 24h, default 1m."},
}

// runnerView is a runner as it last wrote itself down: as it starts, and at
// every lease renewal.
type runnerView struct {
	ID        string    `json:"id"`
	Queues    []string  `json:"queues"`
	Workers   int       `json:"workers"`
	StartedAt time.Time `json:"started_at"`
	SeenAt    time.Time `json:"seen_at"`
	Leader    bool      `json:"leader"` // it leads the maintenance
}

type runnersResponse struct {
	Runners []runnerView `json:"runners"`
}

// recent is how lately a runner must have been seen to count as running.
const recent = time.Minute

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
			Summary: "Jobs counted by status and by kind, and the due jobs waiting (reads the whole table, " +
				"at most once every few seconds: see as_of).", handle: c.stats},
		{Method: "GET", Pattern: "/api/health", Action: ActionRead, Response: healthResponse{},
			Statuses: []int{http.StatusOK, http.StatusServiceUnavailable},
			Summary: "Whether the database answers, and how fast: 200, or 503 when it does not; " +
				"its schema's version, and how many runners were seen within the last minute.", handle: c.health},
		{Method: "GET", Pattern: "/api/runners", Action: ActionRead, Query: runnerParams, Response: runnersResponse{},
			Summary: "The runners seen lately, each with its queues and workers, by ID.", handle: c.runners},
	}
}

func (c *console) schedules(r *http.Request, _ Access) (int, any, error) {
	vs, err := c.scheduleViews(r.Context())
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, schedulesResponse{Schedules: vs}, nil
}

// zonedOrNil is t in loc, or nil for the zero time.
func zonedOrNil(t time.Time, loc *time.Location) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.In(loc)
	return &t
}

// scheduleViews shows the registered schedules and their ticks.
func (c *console) scheduleViews(ctx context.Context) ([]scheduleView, error) {
	states, err := c.client.ScheduleStates(ctx)
	if err != nil {
		return nil, err
	}
	out := []scheduleView{}
	now := time.Now()
	for _, p := range states {
		v := scheduleView{Name: p.Name, Expression: p.Spec.String(), Zone: p.Location.String(), MissedPolicy: "skip",
			Missed: p.MissedTicks, Next: []time.Time{}}
		if p.Periodic.Missed == queue.RunMissedOnce {
			v.MissedPolicy = "run_once"
		}
		v.LastTick, v.Started = zonedOrNil(p.LastTick, p.Location), zonedOrNil(p.Started, p.Location)
		if p.MissedTicks > 0 {
			v.MissedLatest = zonedOrNil(p.LatestMissed, p.Location)
		}
		for t := now; len(v.Next) < nextTicks; {
			next, err := p.Next(t)
			if err != nil || next.IsZero() {
				break
			}
			v.Next = append(v.Next, next)
			t = next
		}
		out = append(out, v)
	}
	return out, nil
}

func (c *console) kinds(*http.Request, Access) (int, any, error) {
	return http.StatusOK, kindsResponse{Kinds: c.reg.Kinds()}, nil
}

func (c *console) stats(r *http.Request, _ Access) (int, any, error) {
	s, at, err := c.statsCache.get(r.Context(), c.cfg.countsTTL, c.client.Stats)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, statsResponse{ByStatus: s.ByStatus, ByKind: s.ByKind, Ready: s.Ready,
		OldestReadySeconds: s.OldestReady.Seconds(), AsOf: at}, nil
}

func (c *console) health(r *http.Request, _ Access) (int, any, error) {
	ctx, cancel := context.WithTimeout(r.Context(), pingTimeout)
	defer cancel()
	d, err := c.client.Ping(ctx)
	if err != nil {
		return http.StatusServiceUnavailable, healthResponse{Status: "unavailable",
			Database: databaseHealth{Error: err.Error()}}, nil
	}
	out := healthResponse{Status: "ok", Database: databaseHealth{Reachable: true, PingMS: float64(d.Microseconds()) / 1000}}
	v, err := c.client.SchemaVersion(ctx)
	if err != nil {
		return 0, nil, err
	}
	out.Schema = &schemaHealth{Version: v, Latest: queue.SchemaVersion}
	if v >= queue.SchemaVersion {
		rs, err := c.client.Runners(ctx, recent)
		if err != nil {
			return 0, nil, err
		}
		n := len(rs)
		out.RecentRunners = &n
	}
	return http.StatusOK, out, nil
}

func (c *console) runners(r *http.Request, _ Access) (int, any, error) {
	q, err := parseQuery(r, runnerParams)
	if err != nil {
		return 0, nil, err
	}
	within, err := q.duration("within", recent, time.Second, 24*time.Hour)
	if err != nil {
		return 0, nil, err
	}
	rs, err := c.client.Runners(r.Context(), within)
	if err != nil {
		return 0, nil, err
	}
	out := runnersResponse{Runners: make([]runnerView, len(rs))}
	for i, x := range rs {
		out.Runners[i] = runnerView{ID: x.ID, Queues: x.Queues, Workers: x.Workers, StartedAt: x.StartedAt, SeenAt: x.SeenAt, Leader: x.Leader}
	}
	return http.StatusOK, out, nil
}
