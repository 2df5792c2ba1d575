package console

import (
	"context"
	"errors"
	"net/http"
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

// cancelRequest names the jobs to cancel, each as by
// POST /api/jobs/{id}/cancel.
type cancelRequest struct {
	IDs []int64 `json:"ids"`
}

// filterBody selects jobs in a request's body, as GET /api/jobs's
// parameters do. Statuses are not among its fields: a bulk retry takes the
// FAILED jobs.
type filterBody struct {
	Kinds       []string   `json:"kinds,omitempty"`
	Queue       string     `json:"queue,omitempty"`
	Run         string     `json:"run,omitempty"`
	Period      string     `json:"period,omitempty"`
	Correlation string     `json:"correlation,omitempty"`
	Since       *time.Time `json:"since,omitempty"`
	Until       *time.Time `json:"until,omitempty"`
}

func (fb filterBody) filter() queue.Filter {
	f := queue.Filter{Kinds: fb.Kinds, Queue: fb.Queue, RunID: fb.Run, Period: fb.Period, CorrelationID: fb.Correlation}
	if fb.Since != nil {
		f.CreatedAfter = *fb.Since
	}
	if fb.Until != nil {
		f.CreatedBefore = *fb.Until
	}
	return f
}

// bulkResponse says how many jobs changed, and why those named by ID that
// did not change did not.
type bulkResponse struct {
	Changed int64        `json:"changed"`
	Refused []refusedJob `json:"refused,omitempty"`
}

// refusedJob is a job of a bulk request by IDs that did not change.
type refusedJob struct {
	ID    int64     `json:"id"`
	Error *apiError `json:"error"`
}

func (c *console) actionRoutes() []route {
	return []route{
		{Method: "POST", Pattern: "/api/jobs/{id}/cancel", Action: ActionCancel, Response: jobResponse{},
			Summary: "Cancel a QUEUED or PROCESSING job (409 wrong_status otherwise).",
			handle:  c.oneJob(ActionCancel, c.client.Cancel)},
		{Method: "POST", Pattern: "/api/jobs/{id}/retry", Action: ActionRetry, Response: jobResponse{},
			Summary: "Put a FAILED or CANCELLED job back in the queue (409 wrong_status otherwise).",
			handle:  c.oneJob(ActionRetry, c.client.Retry)},
		{Method: "POST", Pattern: "/api/jobs/cancel", Action: ActionCancel, Body: cancelRequest{}, Response: bulkResponse{},
			Summary: "Cancel jobs by ID; those that cannot be cancelled are listed as refused.",
			handle:  c.cancelMany},
		{Method: "POST", Pattern: "/api/jobs/retry", Action: ActionRetry, Body: retryRequest{}, Response: bulkResponse{},
			Summary: "Retry jobs by ID (those that cannot be are listed as refused), or every FAILED job a filter selects.",
			handle:  c.retryMany},
	}
}

// oneJob serves an action on the job of the path.
func (c *console) oneJob(act Action, do func(context.Context, int64) (*queue.JobRecord, error)) handlerFunc {
	return func(r *http.Request, acc Access) (int, any, error) {
		id, err := pathID(r)
		if err != nil {
			return 0, nil, err
		}
		rec, err := do(r.Context(), id)
		if err != nil {
			return 0, nil, err
		}
		c.logChange(r, acc, act, id, 1)
		return http.StatusOK, jobResponse{Job: c.view(rec)}, nil
	}
}

func (c *console) cancelMany(r *http.Request, acc Access) (int, any, error) {
	var req cancelRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	if err := checkIDs(req.IDs); err != nil {
		return 0, nil, err
	}
	return c.each(r, acc, ActionCancel, req.IDs, c.client.Cancel)
}

func (c *console) retryMany(r *http.Request, acc Access) (int, any, error) {
	var req retryRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	switch {
	case req.Filter != nil && req.IDs != nil:
		return 0, nil, badRequest("give ids or filter, not both")
	case req.Filter != nil:
		n, err := c.client.RetryFailed(r.Context(), req.Filter.filter())
		if err != nil {
			return 0, nil, err
		}
		c.logChange(r, acc, ActionRetry, *req.Filter, n)
		return http.StatusOK, bulkResponse{Changed: n}, nil
	}
	if err := checkIDs(req.IDs); err != nil {
		return 0, nil, err
	}
	return c.each(r, acc, ActionRetry, req.IDs, c.client.Retry)
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
func (c *console) each(r *http.Request, acc Access, act Action, ids []int64,
	do func(context.Context, int64) (*queue.JobRecord, error)) (int, any, error) {
	var out bulkResponse
	for _, id := range ids {
		_, err := do(r.Context(), id)
		switch {
		case err == nil:
			out.Changed++
		case errors.Is(err, queue.ErrNotFound), errors.Is(err, queue.ErrWrongStatus), errors.Is(err, queue.ErrInvalidOption):
			out.Refused = append(out.Refused, refusedJob{ID: id, Error: c.toAPIError(r, err)})
		default:
			c.logChange(r, acc, act, ids, out.Changed)
			return 0, nil, err
		}
	}
	c.logChange(r, acc, act, ids, out.Changed)
	return http.StatusOK, out, nil
}

// logChange logs a change a caller made: who, what, to which jobs, and how
// many changed.
func (c *console) logChange(r *http.Request, acc Access, act Action, target any, changed int64) {
	c.cfg.logger.Info("console: change", "actor", acc.Actor, "action", string(act), "target", target,
		"changed", changed, "remote", r.RemoteAddr)
}
