package console

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// maxBulkIDs bounds the IDs of one bulk request.
const maxBulkIDs = 1000

// retryRequest names the jobs to retry: IDs (each retried as by
// POST /api/jobs/{id}/retry), or a filter (every FAILED job it selects, in
// one statement). Give one.
type retryRequest struct {
	IDs    []int64     `json:"ids,omitempty"`
	Filter *filterBody `json:"filter,omitempty"`
}

// cancelRequest names the jobs to cancel: IDs (each cancelled as by
// POST /api/jobs/{id}/cancel), or a filter (every QUEUED and PROCESSING
// job it selects; it must set a field). Give one.
type cancelRequest struct {
	IDs    []int64     `json:"ids,omitempty"`
	Filter *filterBody `json:"filter,omitempty"`
	// Reason says why, in at most 500 characters; the audit entry records
	// it, and the jobs' pages show it.
	Reason string `json:"reason,omitempty"`
}

// filterBody selects jobs in a request's body, as GET /api/jobs's
// parameters do. A bulk retry takes the FAILED jobs it selects, a bulk
// cancel the QUEUED and PROCESSING ones.
type filterBody struct {
	// Statuses narrows the jobs further: a bulk cancel takes those of its
	// statuses that are QUEUED or PROCESSING, a bulk retry the FAILED jobs
	// if it lists FAILED. It alone does not make a filter that sets a
	// field, which a bulk cancel needs.
	Statuses    []queue.Status `json:"statuses,omitempty"`
	Kinds       []string       `json:"kinds,omitempty"`
	Queue       string         `json:"queue,omitempty"`
	Run         string         `json:"run,omitempty"`
	Period      string         `json:"period,omitempty"`
	Correlation string         `json:"correlation,omitempty"`
	Since       *time.Time     `json:"since,omitempty"`
	Until       *time.Time     `json:"until,omitempty"`
	// Q is text in the last error or the arguments, as GET /api/jobs's q.
	Q string `json:"q,omitempty"`
}

// empty reports whether fb selects every job.
func (fb filterBody) empty() bool {
	return len(fb.Kinds) == 0 && fb.Queue == "" && fb.Run == "" && fb.Period == "" && fb.Correlation == "" &&
		fb.Since == nil && fb.Until == nil && fb.Q == ""
}

func (fb filterBody) filter() queue.Filter {
	f := queue.Filter{Kinds: fb.Kinds, Queue: fb.Queue, RunID: fb.Run, Period: fb.Period, CorrelationID: fb.Correlation,
		Search: fb.Q, Statuses: fb.Statuses}
	if fb.Since != nil {
		f.CreatedAfter = *fb.Since
	}
	if fb.Until != nil {
		f.CreatedBefore = *fb.Until
	}
	return f
}

// bulkResponse says how many jobs changed, why those named by ID that did
// not change did not, and where the audit log recorded the request.
type bulkResponse struct {
	Changed int64        `json:"changed"`
	Refused []refusedJob `json:"refused,omitempty"`
	// AuditID is the request's audit entry; AuditURL the audit page that
	// starts at it, from the console's root. Both are absent when the
	// audit log did not take the entry (the server logs why).
	AuditID  int64  `json:"audit_id,omitempty"`
	AuditURL string `json:"audit_url,omitempty"`
}

// answered returns out, to be told its audit entry when ch is recorded.
func (out *bulkResponse) answered(ch *change) *bulkResponse {
	ch.recorded = func(id int64) { out.AuditID, out.AuditURL = id, auditLink(id) }
	return out
}

// refusedJob is a job of a bulk request by IDs that did not change.
type refusedJob struct {
	ID    int64     `json:"id"`
	Error *apiError `json:"error"`
}

func (c *console) actionRoutes() []route {
	return []route{
		{Method: "POST", Pattern: "/api/jobs/{id}/cancel", Action: ActionCancel, Body: cancelOneRequest{}, BodyOptional: true,
			Response: jobResponse{},
			Summary: "Cancel a QUEUED or PROCESSING job (409 wrong_status otherwise), with an optional reason " +
				"(400 reason_too_long over 500 characters) that the audit entry records.",
			handle: c.cancelOne},
		{Method: "POST", Pattern: "/api/jobs/{id}/retry", Action: ActionRetry, Response: jobResponse{},
			Summary: "Put a FAILED or CANCELLED job back in the queue (409 wrong_status otherwise).",
			handle:  c.oneJob(c.client.Retry)},
		{Method: "POST", Pattern: "/api/jobs/{id}/run", Action: ActionRetry, Response: jobResponse{},
			Summary: "Make a QUEUED job that waits for its run time (a retry's backoff, a job submitted for later) due now, " +
				"keeping its attempts; a job already due stays as it is (409 wrong_status for other statuses). " +
				"It needs the retry permission: it brings a retry forward.",
			handle: c.runNow},
		{Method: "POST", Pattern: "/api/jobs/cancel", Action: ActionCancel, Body: cancelRequest{}, Response: bulkResponse{},
			Summary: "Cancel jobs by ID (those that cannot be are listed as refused), or every QUEUED and PROCESSING job " +
				"a filter selects (a filter that sets no field is refused), with an optional reason as for one job.",
			handle: c.cancelMany},
		{Method: "POST", Pattern: "/api/jobs/retry", Action: ActionRetry, Body: retryRequest{}, Response: bulkResponse{},
			Summary: "Retry jobs by ID (those that cannot be are listed as refused), or every FAILED job a filter selects.",
			handle:  c.retryMany},
	}
}

// oneJob serves an action on the job of the path.
func (c *console) oneJob(do func(context.Context, int64) (*queue.JobRecord, error)) handlerFunc {
	return func(r *http.Request, _ Access) (int, any, error) {
		id, err := pathID(r)
		if err != nil {
			return 0, nil, err
		}
		ch := changeOf(r)
		ch.target = map[string]any{"job": id}
		rec, err := do(r.Context(), id)
		if err != nil {
			return 0, nil, err
		}
		ch.changed = 1
		return http.StatusOK, jobResponse{Job: c.view(rec)}, nil
	}
}

// runNow serves "run now", recorded in the audit log as run_now.
func (c *console) runNow(r *http.Request, acc Access) (int, any, error) {
	changeOf(r).action = "run_now"
	return c.oneJob(c.client.RunNow)(r, acc)
}

func (c *console) cancelMany(r *http.Request, _ Access) (int, any, error) {
	var req cancelRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	if req.Filter != nil && req.IDs == nil && req.Filter.empty() {
		return 0, nil, badRequest("the filter sets no field, and would cancel every job; give at least one")
	}
	reason, err := CheckReason(req.Reason)
	if err != nil {
		return 0, nil, err
	}
	return withReason(r, reason)(c.many(r, req.IDs, req.Filter, c.client.Cancel, c.client.CancelMatching))
}

func (c *console) retryMany(r *http.Request, _ Access) (int, any, error) {
	var req retryRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	retry := c.client.RetryFailed
	if req.Filter != nil && len(req.Filter.Statuses) > 0 && !slices.Contains(req.Filter.Statuses, queue.StatusFailed) {
		retry = func(context.Context, queue.Filter) (int64, error) { return 0, nil } // no FAILED job is selected
	}
	return c.many(r, req.IDs, req.Filter, c.client.Retry, retry)
}

// many serves a bulk action: one on each job of ids, or one on every job
// the filter fb selects.
func (c *console) many(r *http.Request, ids []int64, fb *filterBody,
	one func(context.Context, int64) (*queue.JobRecord, error),
	matching func(context.Context, queue.Filter) (int64, error)) (int, any, error) {
	if fb != nil && ids != nil {
		return 0, nil, badRequest("give ids or filter, not both")
	}
	ch := changeOf(r)
	if fb != nil {
		if err := checkStatuses(fb.Statuses); err != nil {
			return 0, nil, err
		}
		ch.target = map[string]any{"filter": fb}
		n, err := matching(r.Context(), fb.filter())
		ch.changed = n
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, (&bulkResponse{Changed: n}).answered(ch), nil
	}
	if err := checkIDs(ids); err != nil {
		return 0, nil, err
	}
	ch.target = map[string]any{"ids": ids}
	return c.each(r, ch, ids, one)
}

// checkStatuses refuses what is not a status.
func checkStatuses(ss []queue.Status) error {
	for _, s := range ss {
		if !slices.Contains(queue.Statuses(), s) {
			return badRequest("filter.statuses: %q is not a status (QUEUED, PROCESSING, COMPLETED, FAILED, CANCELLED)", s)
		}
	}
	return nil
}

func checkIDs(ids []int64) error {
	switch {
	case len(ids) == 0:
		return badRequest("ids is required: the IDs of the jobs")
	case len(ids) > maxBulkIDs:
		return badRequest("%d ids; at most %d per request", len(ids), maxBulkIDs)
	}
	return nil
}

// each applies do to every job of ids. A job that is not there, or not in
// a status do accepts, is listed as refused; any other error ends the
// request, the jobs before it changed.
func (c *console) each(r *http.Request, ch *change, ids []int64,
	do func(context.Context, int64) (*queue.JobRecord, error)) (int, any, error) {
	var out bulkResponse
	for _, id := range ids {
		_, err := do(r.Context(), id)
		switch {
		case err == nil:
			out.Changed++
			ch.changed = out.Changed
		case errors.Is(err, queue.ErrNotFound), errors.Is(err, queue.ErrWrongStatus), errors.Is(err, queue.ErrInvalidOption):
			out.Refused = append(out.Refused, refusedJob{ID: id, Error: c.toAPIError(r, err)})
		default:
			return 0, nil, err
		}
	}
	return http.StatusOK, out.answered(ch), nil
}
