package console

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

var runParams = []param{
	{Name: "period", Doc: "Runs with jobs of this period."},
	{Name: "since", Format: "date-time", Doc: "Runs whose first job was created at or after this time."},
	{Name: "until", Format: "date-time", Doc: "Runs whose first job was created before this time."},
	{Name: "cursor", Doc: "The next_cursor of the previous page."},
	{Name: "limit", Type: "integer", Doc: "Runs per page: 1 to 500, default 50."},
}

var reviewParams = []param{
	{Name: "slow_factor", Type: "number", Doc: "Flag completed jobs that took this many times their kind's median. Default 1.5."},
	{Name: "history", Type: "integer", Doc: "How many earlier jobs of a kind make its median. Default 20."},
	{Name: "limit", Type: "integer", Doc: "How many jobs each list of the review holds at most, 1 to 10000; its more_ field counts the rest. Default 100."},
}

// runView is one run, newest first in listings.
type runView struct {
	RunID          string                 `json:"run_id"`
	Period         string                 `json:"period,omitempty"`
	Total          int64                  `json:"total"`
	Counts         map[queue.Status]int64 `json:"counts"`
	FirstCreatedAt time.Time              `json:"first_created_at"`
	LastCreatedAt  time.Time              `json:"last_created_at"`
	// LastFinishedAt is when the run's latest job to finish did: the
	// run's finish once none is queued or running.
	LastFinishedAt *time.Time `json:"last_finished_at,omitempty"`
}

// Done reports whether the run has finished: it has a finish, and no job
// queued or running.
func (r runView) Done() bool {
	return r.LastFinishedAt != nil && r.Counts[queue.StatusQueued]+r.Counts[queue.StatusProcessing] == 0
}

// Took is the run's wall time, from its first job's creation to its
// latest job's finish; 0 until it is Done.
func (r runView) Took() time.Duration {
	if !r.Done() {
		return 0
	}
	return r.SoFar()
}

// SoFar is the time from the run's first job's creation to its latest
// job's finish, finished or not; 0 before any job has finished.
func (r runView) SoFar() time.Duration {
	if r.LastFinishedAt == nil {
		return 0
	}
	return r.LastFinishedAt.Sub(r.FirstCreatedAt)
}

type runsResponse struct {
	Runs       []runView `json:"runs"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// reviewView is queue.Review in JSON, with the failures grouped by their
// error.
type reviewView struct {
	RunID    string                 `json:"run_id"`
	Total    int64                  `json:"total"`
	Counts   map[queue.Status]int64 `json:"counts"`
	Failed   []jobView              `json:"failed"`
	Failures []failureGroup         `json:"failure_groups"`
	Slow     []slowView             `json:"slow"`
	NeverRan []jobView              `json:"never_ran"`
	// Waiting says, for each job of NeverRan, why it has not started yet.
	Waiting []waitingView `json:"waiting"`
	// Cancelled are the run's jobs cancelled before they started, at most
	// Limit, each with who cancelled it, from the audit log's recent
	// entries.
	Cancelled   []cancelledView `json:"cancelled"`
	MissedTicks []tickView      `json:"missed_ticks"`
	Stopped     []stoppedView   `json:"stopped"`
	// Retrying are the jobs QUEUED again after a failed attempt, waiting
	// for their retry.
	Retrying []jobView `json:"retrying"`
	// Typical is the median duration of each kind with a completed job in
	// the run, over its earlier completed jobs, that the slow check
	// compared with (SlowFactor times it, over History jobs).
	Typical    []typicalView `json:"typical"`
	SlowFactor float64       `json:"slow_factor"`
	History    int           `json:"history"`
	// The More fields count the jobs past each list's limit.
	MoreFailed   int64 `json:"more_failed"`
	MoreSlow     int64 `json:"more_slow"`
	MoreNeverRan int64 `json:"more_never_ran"`
	MoreRetrying int64 `json:"more_retrying"`
	MoreStopped  int64 `json:"more_stopped"`
}

// cancelledView is a job cancelled before it started, and the audit
// entry of the console's request that cancelled it; none when the job was
// cancelled some other way (a program, the sheaf command) or the entry is
// not among the recent ones.
type cancelledView struct {
	Job jobView `json:"job"`
	// By, At and AuditID are the entry's actor, time and ID.
	By      string     `json:"by,omitempty"`
	At      *time.Time `json:"at,omitempty"`
	AuditID int64      `json:"audit_id,omitempty"`
}

// typicalView is what a kind's jobs were compared with (queue.Baseline):
// the median and 95th percentile run time of its earlier completed jobs,
// and how many jobs, or days of roll-ups, they were taken over; 0 seconds
// when no earlier job of the kind is known.
type typicalView struct {
	Kind       string  `json:"kind"`
	Seconds    float64 `json:"seconds"`
	P95Seconds float64 `json:"p95_seconds"`
	Jobs       int     `json:"jobs"`
	Days       int     `json:"days"`
}

type reviewResponse struct {
	Review reviewView `json:"review"`
}

// failureGroup is the failed jobs whose errors read the same once numbers,
// UUIDs and hex are taken out.
type failureGroup struct {
	Message      string   `json:"message"`
	Count        int      `json:"count"`
	Kinds        []string `json:"kinds"`
	ExampleJobID int64    `json:"example_job_id"`
	// JobIDs are the group's first jobs (at most ten), by ascending ID.
	JobIDs []int64 `json:"job_ids"`
}

// waitingView is a job still waiting to start, and why, as far as the
// console can tell: its reasons' codes are scheduled_later (its run time
// is to come), queue_paused, window_closed (its queue's or its kind's
// batch window), limit_reached (a limit across the runners of its kind,
// queue or partition key has no room: "limit queue q reached (1 of 1
// running)"), or due when none of those holds and it waits for a runner
// on its queue to take it. A job that waits for its parents is not
// among them: the rules create it once they have completed.
type waitingView struct {
	JobID   int64        `json:"job_id"`
	Reasons []waitReason `json:"reasons"`
}

type waitReason struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

type slowView struct {
	Job            jobView `json:"job"`
	Seconds        float64 `json:"seconds"`
	TypicalSeconds float64 `json:"typical_seconds"`
	P95Seconds     float64 `json:"p95_seconds"`
}

type tickView struct {
	Schedule string    `json:"schedule"`
	At       time.Time `json:"at"`
	RunID    string    `json:"run_id"`
	Period   string    `json:"period"`
}

type stoppedView struct {
	Rule         string    `json:"rule"`
	ChildKind    string    `json:"child_kind"`
	Group        string    `json:"group"`
	Blocking     []jobView `json:"blocking"`
	MissingKinds []string  `json:"missing_kinds"`
}

func (c *console) runRoutes() []route {
	return []route{
		{Method: "GET", Pattern: "/api/runs", Action: ActionRead, Query: runParams, Response: runsResponse{},
			Summary: "Runs (the jobs of a schedule's tick and those they released), newest first, a page at a time.",
			handle:  reads(runParams, c.runsPage)},
		{Method: "GET", Pattern: "/api/runs/{id}/review", Action: ActionRead, Query: reviewParams, Response: reviewResponse{},
			Summary: "The morning review of a run: counts, failures (also grouped by error), slow jobs, jobs that never ran " +
				"and why they wait, ticks that created nothing, dependency chains that stopped.",
			handle: c.review},
	}
}

// runsPage is the page of runs that q (runParams) selects.
func (c *console) runsPage(ctx context.Context, q query) (runsResponse, error) {
	rq := queue.RunsQuery{Period: q.str("period")}
	var err error
	if rq.FirstFrom, err = q.time("since"); err != nil {
		return runsResponse{}, err
	}
	if rq.FirstBefore, err = q.time("until"); err != nil {
		return runsResponse{}, err
	}
	limit, err := q.int("limit", defaultLimit, 1, maxLimit)
	if err != nil {
		return runsResponse{}, err
	}
	if s := q.str("cursor"); s != "" {
		var cur runCursor
		if err := decodeCursor("cursor", s, &cur); err != nil {
			return runsResponse{}, err
		}
		if cur.RunID == "" {
			return runsResponse{}, badParam("cursor", "not a cursor this server wrote")
		}
		rq.After = &queue.RunSummary{RunID: cur.RunID, FirstCreated: cur.First}
	}
	rq.Limit = limit + 1
	runs, err := c.client.Runs(ctx, rq)
	if err != nil {
		return runsResponse{}, err
	}
	out := runsResponse{Runs: []runView{}}
	if len(runs) > limit {
		runs = runs[:limit]
		last := runs[limit-1]
		out.NextCursor = encodeCursor(runCursor{First: last.FirstCreated, RunID: last.RunID})
	}
	for _, s := range runs {
		out.Runs = append(out.Runs, runOf(s))
	}
	return out, nil
}

func (c *console) review(r *http.Request, _ Access) (int, any, error) {
	q, err := parseQuery(r, reviewParams)
	if err != nil {
		return 0, nil, err
	}
	rq, err := reviewQueryOf(r, q)
	if err != nil {
		return 0, nil, err
	}
	out, err := c.reviewOf(r.Context(), rq)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, reviewResponse{Review: out}, nil
}

// reviewQueryOf is the review of the run of r's path that q (reviewParams)
// asks for.
func reviewQueryOf(r *http.Request, q query) (queue.ReviewQuery, error) {
	rq := queue.ReviewQuery{RunID: r.PathValue("id")}
	if err := checkParam("id", rq.RunID); err != nil {
		return rq, err
	}
	var err error
	if rq.SlowFactor, err = q.float("slow_factor", 1); err != nil {
		return rq, err
	}
	if rq.History, err = q.int("history", 0, 1, 10_000); err != nil {
		return rq, err
	}
	rq.Limit, err = q.int("limit", 0, 1, 10_000)
	return rq, err
}

// reviewOf is the morning review rq asks for.
func (c *console) reviewOf(ctx context.Context, rq queue.ReviewQuery) (reviewView, error) {
	rv, err := c.client.Review(ctx, rq)
	if err != nil {
		return reviewView{}, err
	}
	if rq.RunID != "" && rv.Total == 0 && len(rv.MissedTicks) == 0 {
		return reviewView{}, &apiError{Status: http.StatusNotFound, Code: "not_found",
			Message: "no run " + rq.RunID + ": no job has this run ID, and no tick of this run was missed"}
	}
	out := reviewView{RunID: rq.RunID, Total: rv.Total, Counts: rv.Counts, Failed: c.views(rv.Failed),
		Failures: failureGroups(rv.Failures), Slow: []slowView{}, NeverRan: c.views(rv.NeverRan),
		MissedTicks: []tickView{}, Stopped: []stoppedView{}, Retrying: c.views(rv.Retrying), Typical: []typicalView{},
		SlowFactor: rv.Query.SlowFactor, History: rv.Query.History, MoreFailed: rv.MoreFailed, MoreSlow: rv.MoreSlow,
		MoreNeverRan: rv.MoreNeverRan, MoreRetrying: rv.MoreRetrying, MoreStopped: rv.MoreStopped}
	for _, k := range slices.Sorted(maps.Keys(rv.Typical)) {
		b := rv.Typical[k]
		out.Typical = append(out.Typical, typicalView{Kind: k, Seconds: b.Median.Seconds(), P95Seconds: b.P95.Seconds(), Jobs: b.Jobs, Days: b.Days})
	}
	if out.Waiting, err = c.waiting(ctx, rv.NeverRan); err != nil {
		return reviewView{}, err
	}
	if out.Cancelled, err = c.cancelledUnstarted(ctx, rv); err != nil {
		return reviewView{}, err
	}
	for _, s := range rv.Slow {
		out.Slow = append(out.Slow, slowView{Job: c.view(&s.Job), Seconds: s.Duration.Seconds(), TypicalSeconds: s.Typical.Seconds(), P95Seconds: s.P95.Seconds()})
	}
	for _, t := range rv.MissedTicks {
		out.MissedTicks = append(out.MissedTicks, tickView{Schedule: t.Schedule, At: t.At, RunID: t.RunID, Period: t.Period})
	}
	for _, s := range rv.Stopped {
		missing := s.MissingKinds
		if missing == nil {
			missing = []string{}
		}
		out.Stopped = append(out.Stopped, stoppedView{Rule: s.Rule, ChildKind: s.ChildKind, Group: s.Group,
			Blocking: c.views(s.Blocking), MissingKinds: missing})
	}
	return out, nil
}

// cancelledUnstarted lists the jobs of rv's run that were cancelled
// before they started, each with the audit entry that cancelled it.
func (c *console) cancelledUnstarted(ctx context.Context, rv *queue.Review) ([]cancelledView, error) {
	out := []cancelledView{}
	if rv.Query.RunID == "" || rv.Counts[queue.StatusCancelled] == 0 {
		return out, nil
	}
	jobs, err := c.client.List(ctx, queue.Filter{RunID: rv.Query.RunID, Statuses: []queue.Status{queue.StatusCancelled},
		Limit: rv.Query.Limit})
	if err != nil {
		return nil, err
	}
	var entries []queue.AuditEntry
	for i := range jobs {
		if jobs[i].StartedAt != nil {
			continue
		}
		if entries == nil {
			if entries, err = c.client.AuditLog(ctx, 0, auditScan); err != nil {
				return nil, err
			}
		}
		v := cancelledView{Job: c.view(&jobs[i])}
		if e := cancelEntry(entries, v.Job); e != nil {
			v.By, v.At, v.AuditID = e.Actor, &e.At, e.ID
		}
		out = append(out, v)
	}
	return out, nil
}

// waiting says why each of jobs, which have not started, waits.
func (c *console) waiting(ctx context.Context, jobs []queue.JobRecord) ([]waitingView, error) {
	out := make([]waitingView, 0, len(jobs))
	if len(jobs) == 0 {
		return out, nil
	}
	qs, err := c.client.Queues(ctx)
	if err != nil {
		return nil, err
	}
	paused := map[string]bool{}
	for _, q := range qs {
		paused[q.Name] = q.Paused
	}
	limits, err := c.client.Limits(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for _, j := range jobs {
		w := waitingView{JobID: j.ID, Reasons: []waitReason{}}
		if j.RunAt.After(now) {
			w.Reasons = append(w.Reasons, waitReason{Code: "scheduled_later", Detail: "runs at " + j.RunAt.Format(time.RFC3339)})
		}
		if paused[j.Queue] {
			w.Reasons = append(w.Reasons, waitReason{Code: "queue_paused", Detail: "queue " + j.Queue + " is paused"})
		}
		if win, ok := c.reg.ClosedWindow(j.Kind, j.Queue, now); ok {
			w.Reasons = append(w.Reasons, waitReason{Code: "window_closed", Detail: "its window " + win.String() + " is closed"})
		}
		if !j.RunAt.After(now) {
			for _, l := range holding(limits, j.Kind, j.Queue, j.LimitKey) {
				w.Reasons = append(w.Reasons, waitReason{Code: "limit_reached", Detail: l})
			}
		}
		if len(w.Reasons) == 0 {
			w.Reasons = append(w.Reasons, waitReason{Code: "due", Detail: "due: waiting for a runner of queue " + j.Queue + " to take it"})
		}
		out = append(out, w)
	}
	return out, nil
}

// failureGroups are the review's failure groups as the console shows them.
func failureGroups(groups []queue.FailureGroup) []failureGroup {
	out := make([]failureGroup, len(groups))
	for i, g := range groups {
		out[i] = failureGroup{Message: g.Error, Count: int(g.Count), Kinds: g.Kinds, JobIDs: g.JobIDs}
		if out[i].Kinds == nil {
			out[i].Kinds = []string{}
		}
		if len(g.JobIDs) > 0 {
			out[i].ExampleJobID = g.JobIDs[0]
		} else {
			out[i].JobIDs = []int64{}
		}
	}
	return out
}
