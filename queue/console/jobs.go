package console

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/internal/jobview"
)

// Listing limits.
const (
	defaultLimit = 50
	maxLimit     = 500
)

// SearchWindow is how many jobs, by ID, one page of GET /api/jobs?q=
// examines: the text is searched for in the SearchWindow jobs below the
// page's cursor (the newest, on the first page), whatever the other
// filters. A page may then hold fewer jobs than its limit, or none, and
// still have a next_cursor, which goes on below the jobs examined. It
// bounds a page's time (about 40 ms on PostgreSQL on two cores) on a
// table of any size.
const SearchWindow = 25_000

var listParams = []param{
	{Name: "status", Type: "list", Doc: "Statuses, repeated or separated by commas: QUEUED, PROCESSING, COMPLETED, FAILED, CANCELLED."},
	{Name: "kind", Type: "list", Doc: "Kinds, repeated or separated by commas."},
	{Name: "queue", Doc: "A queue's name."},
	{Name: "run", Doc: "A run ID: a schedule's tick and the jobs it released."},
	{Name: "period", Doc: "A period, such as a tick's local date (2006-01-02)."},
	{Name: "correlation", Doc: "A correlation ID."},
	{Name: "since", Format: "date-time", Doc: "Jobs created after this time (RFC 3339)."},
	{Name: "until", Format: "date-time", Doc: "Jobs created before this time (RFC 3339)."},
	{Name: "q", Doc: "Text to find, ignoring case, in the job's last error or its arguments (as stored, before any ArgsFormatter). " +
		"A page examines the 25,000 jobs (by ID) below its cursor: it may hold fewer jobs than limit, or none, and still have a next_cursor."},
	{Name: "cursor", Doc: "The next_cursor of the previous page."},
	{Name: "limit", Type: "integer", Doc: "Jobs per page: 1 to 500, default 50."},
}

// countParams are listParams but for the page's.
var countParams = slices.DeleteFunc(slices.Clone(listParams), func(p param) bool { return p.Name == "cursor" || p.Name == "limit" })

// countResponse is how many jobs match.
type countResponse struct {
	Count int64 `json:"count"`
}

// jobResponse is one job.
type jobResponse struct {
	Job jobView `json:"job"`
}

// jobDetailResponse is one job, and its last 20 attempts (one per claim
// by a runner), oldest first.
type jobDetailResponse struct {
	Job      jobView       `json:"job"`
	Attempts []attemptView `json:"attempts"`
}

// enqueueResponse is a submitted job, or the job that already had its
// idempotency key (Duplicate; nothing was created).
type enqueueResponse struct {
	Job       jobView `json:"job"`
	Duplicate bool    `json:"duplicate"`
}

// jobsResponse is a page of jobs; NextCursor is absent on the last.
type jobsResponse struct {
	Jobs       []jobView `json:"jobs"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// enqueueRequest submits a job; see Client.EnqueueRaw. Absent fields take
// the kind's defaults.
type enqueueRequest struct {
	Kind        string          `json:"kind"`
	Args        json.RawMessage `json:"args,omitempty"`
	Queue       string          `json:"queue,omitempty"`
	Priority    *int            `json:"priority,omitempty"`
	RunAt       *time.Time      `json:"run_at,omitempty"`
	MaxAttempts *int            `json:"max_attempts,omitempty"`
	// CorrelationID defaults to the request's traceparent trace ID, or its
	// X-Correlation-ID header.
	CorrelationID string `json:"correlation_id,omitempty"`
	// IdempotencyKey may be given in the Idempotency-Key header instead.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

func (c *console) jobRoutes() []route {
	return []route{
		{Method: "GET", Pattern: "/api/jobs", Action: ActionRead, Query: listParams, Response: jobsResponse{},
			Summary: "Jobs that match the filters, newest first, a page at a time (keyset pages: hand next_cursor back as cursor).",
			handle:  reads(listParams, c.jobsPage)},
		{Method: "POST", Pattern: "/api/jobs", Action: ActionSubmit, Body: enqueueRequest{}, Response: enqueueResponse{},
			Statuses: []int{http.StatusCreated, http.StatusOK},
			Summary: "Submit a job: 201 when created, 200 with the existing job when its idempotency key " +
				"(field or Idempotency-Key header) was taken.",
			handle: c.enqueue},
		{Method: "GET", Pattern: "/api/jobs/count", Action: ActionRead, Query: countParams, Response: countResponse{},
			Summary: "How many jobs match the filters of GET /api/jobs (with q, it reads every job the other filters select).",
			handle:  c.countJobs},
		{Method: "GET", Pattern: "/api/jobs/{id}", Action: ActionRead, Response: jobDetailResponse{},
			Summary: "One job, with its output, the IDs of the jobs its completion released, and its last 20 attempts.",
			handle:  c.getJob},
	}
}

// pathID reads the {id} of a job's path.
func pathID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, &apiError{Status: http.StatusBadRequest, Code: "bad_request", Message: "a job ID is a positive whole number"}
	}
	return id, nil
}

func (c *console) getJob(r *http.Request, _ Access) (int, any, error) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	out, err := c.jobDetail(r.Context(), id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, out, nil
}

// jobDetail is job id with its children, output and attempts.
func (c *console) jobDetail(ctx context.Context, id int64) (jobDetailResponse, error) {
	rec, err := c.client.Get(ctx, id)
	if err != nil {
		return jobDetailResponse{}, err
	}
	kids, err := c.client.Children(ctx, id)
	if err != nil {
		return jobDetailResponse{}, err
	}
	attempts, err := c.client.Attempts(ctx, id)
	if err != nil {
		return jobDetailResponse{}, err
	}
	v := c.view(rec)
	for _, k := range kids {
		v.ChildIDs = append(v.ChildIDs, k.ID)
	}
	if len(rec.Output) > 0 {
		v.Output = rec.Output
	}
	// A kind this console's registry does not know (sheaf serve knows
	// none) may be chunked too: its chunk times are one column's read.
	if _, chunked := c.reg.ChunkSize(rec.Kind); chunked || !slices.Contains(c.reg.Kinds(), rec.Kind) {
		times, err := c.client.ChunkTimes(ctx, id)
		if err != nil {
			return jobDetailResponse{}, err
		}
		v.Progress.SetChunkTimes(times)
	}
	return jobDetailResponse{Job: v, Attempts: jobview.Attempts(attempts)}, nil
}

// jobsPage is the page of jobs that q (listParams) selects.
func (c *console) jobsPage(ctx context.Context, q query) (jobsResponse, error) {
	f, err := readFilter(q)
	if err != nil {
		return jobsResponse{}, err
	}
	limit, err := q.int("limit", defaultLimit, 1, maxLimit)
	if err != nil {
		return jobsResponse{}, err
	}
	var cur *jobCursor
	if s := q.str("cursor"); s != "" {
		cur = new(jobCursor)
		if err := decodeCursor("cursor", s, cur); err != nil {
			return jobsResponse{}, err
		}
	}
	if err := pageJobs(&f, cur); err != nil {
		return jobsResponse{}, err
	}
	if f.Search != "" {
		if err := c.searchWindow(ctx, &f); err != nil {
			return jobsResponse{}, err
		}
	}
	f.Limit = limit + 1 // one more tells whether there is a next page
	recs, err := c.client.List(ctx, f)
	if err != nil {
		return jobsResponse{}, err
	}
	out := jobsResponse{}
	switch {
	case len(recs) > limit:
		recs = recs[:limit]
		out.NextCursor = encodeCursor(nextJobs(recs[limit-1]))
	case f.AfterID > 0: // the search's window ended above the oldest jobs
		out.NextCursor = encodeCursor(jobCursor{Before: f.AfterID + 1})
	}
	out.Jobs = c.views(recs)
	return out, nil
}

func (c *console) countJobs(r *http.Request, _ Access) (int, any, error) {
	q, err := parseQuery(r, countParams)
	if err != nil {
		return 0, nil, err
	}
	f, err := readFilter(q)
	if err != nil {
		return 0, nil, err
	}
	n, err := c.client.Count(r.Context(), f)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, countResponse{Count: n}, nil
}

// searchWindow bounds a search to the SearchWindow jobs below f's
// BeforeID, or below the newest job's ID.
func (c *console) searchWindow(ctx context.Context, f *queue.Filter) error {
	top := f.BeforeID // exclusive
	if top == 0 {
		newest, err := c.client.List(ctx, queue.Filter{Newest: true, Limit: 1})
		if err != nil || len(newest) == 0 {
			return err
		}
		top = newest[0].ID + 1
	}
	f.AfterID = max(top-c.window-1, 0)
	return nil
}

// readFilter reads the filters of a listing of jobs.
func readFilter(q query) (queue.Filter, error) {
	f := queue.Filter{Kinds: q.list("kind"), Queue: q.str("queue"), RunID: q.str("run"),
		Period: q.str("period"), CorrelationID: q.str("correlation"), Search: q.str("q")}
	for _, s := range q.list("status") {
		st := queue.Status(strings.ToUpper(s))
		if !slices.Contains(queue.Statuses(), st) {
			return f, badParam("status", "%q is not a status (QUEUED, PROCESSING, COMPLETED, FAILED, CANCELLED)", s)
		}
		f.Statuses = append(f.Statuses, st)
	}
	var err error
	if f.CreatedAfter, err = q.time("since"); err != nil {
		return f, err
	}
	if f.CreatedBefore, err = q.time("until"); err != nil {
		return f, err
	}
	return f, nil
}

func (c *console) enqueue(r *http.Request, _ Access) (int, any, error) {
	var req enqueueRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	if req.Kind == "" {
		return 0, nil, badRequest("kind is required")
	}
	if len(req.Args) == 0 || string(req.Args) == "null" {
		req.Args = json.RawMessage("{}")
	}
	key := r.Header.Get("Idempotency-Key")
	switch {
	case key != "" && req.IdempotencyKey != "" && key != req.IdempotencyKey:
		return 0, nil, badRequest("the Idempotency-Key header and the idempotency_key field differ")
	case key == "":
		key = req.IdempotencyKey
	}
	var opts []queue.EnqueueOption
	if req.Queue != "" {
		opts = append(opts, queue.OnQueue(req.Queue))
	}
	if req.Priority != nil {
		opts = append(opts, queue.Priority(*req.Priority))
	}
	if req.RunAt != nil {
		opts = append(opts, queue.RunAt(*req.RunAt))
	}
	if req.MaxAttempts != nil {
		opts = append(opts, queue.MaxAttempts(*req.MaxAttempts))
	}
	if key != "" {
		opts = append(opts, queue.IdempotencyKey(key))
	}
	corr := req.CorrelationID
	if corr == "" {
		corr = requestCorrelation(r)
	}
	if corr != "" {
		opts = append(opts, queue.CorrelationID(corr))
	}
	if tp := strings.TrimSpace(r.Header.Get("traceparent")); tp != "" {
		if _, ok := traceID(tp); ok {
			// The job's attempts link to the caller's trace. A tracestate
			// too long to keep is dropped, as W3C allows.
			state := r.Header.Get("tracestate")
			if len(state) > 512 {
				state = ""
			}
			opts = append(opts, queue.TraceContext(tp, state))
		}
	}
	if c.cfg.submitter != nil {
		claims, err := c.cfg.submitter(r)
		if err != nil {
			return 0, nil, &apiError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: err.Error()}
		}
		if claims != nil {
			opts = append(opts, queue.AuthContext(claims))
		}
	}
	ch := changeOf(r)
	ch.target = map[string]any{"kind": req.Kind}
	res, err := c.client.EnqueueRaw(r.Context(), req.Kind, req.Args, opts...)
	if err != nil {
		return 0, nil, err
	}
	ch.target["job"] = res.Job.ID
	status := http.StatusCreated
	if res.Duplicate {
		status = http.StatusOK
		ch.target["duplicate"] = true
	} else {
		ch.changed = 1
	}
	return status, enqueueResponse{Job: c.view(res.Job), Duplicate: res.Duplicate}, nil
}
