package console

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// limitView is a limit with its use now.
type limitView struct {
	limitRequest
	// By is who set it: empty for a limit the registration declared.
	By        string    `json:"by"`
	ChangedAt time.Time `json:"changed_at"`
	// Running and Started are the jobs of its scope running now and
	// started in the last period; for a key limit, of its busiest key.
	Running int    `json:"running"`
	Started int    `json:"started"`
	Key     string `json:"key,omitempty"`
	Reached bool   `json:"reached"`
	// Use says it in words: "limit kind report reached (5 of 5 running)".
	Use string `json:"use"`
}

// Request is the body that sets the limit as it is, which the page's
// form starts from to change it.
func (v limitView) Request() limitRequest { return v.limitRequest }

// Period says the rate's period in words: "minute", "hour", "1m30s".
func (v limitView) Period() string {
	per := time.Duration(v.PerSeconds * float64(time.Second))
	for _, u := range []struct {
		d    time.Duration
		word string
	}{{24 * time.Hour, "day"}, {time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}} {
		if per == u.d {
			return u.word
		}
	}
	return dur(per)
}

type limitsResponse struct {
	Limits []limitView `json:"limits"`
}

// limitRequest sets a limit (POST /api/limits), or names one to remove.
type limitRequest struct {
	Scope       queue.LimitScope `json:"scope"`
	Target      string           `json:"target"`
	Concurrency int              `json:"concurrency"`
	Rate        int              `json:"rate"`
	// PerSeconds is the rate's period; it counts only with a rate, so a
	// form may leave it filled in when it sets none.
	PerSeconds float64 `json:"per_seconds"`
	// Fair, for a key limit, makes claims take turns among the kind's
	// keys, Weights giving some keys more turns (a key not in it weighs 1).
	Fair      bool           `json:"fair"`
	Weights   map[string]int `json:"weights,omitempty"`
	Suspended bool           `json:"suspended"`
}

// Toggled is the body that suspends the limit, or resumes it if
// suspended, leaving the rest as it is.
func (v limitView) Toggled() limitRequest {
	r := v.limitRequest
	r.Suspended = !r.Suspended
	return r
}

func (c *console) limitRoutes() []route {
	return []route{
		{Method: "GET", Pattern: "/api/limits", Action: ActionRead, Response: limitsResponse{},
			Summary: "Every limit across the runners, with its use now: jobs of its scope running, and started in its period.",
			handle:  c.listLimits},
		{Method: "POST", Pattern: "/api/limits", Action: ActionPause, Body: limitRequest{}, Response: limitsResponse{},
			Summary: "Set a limit (scope kind, queue or key; its target, the kind or queue), replacing any, or suspend " +
				"one (suspended: true keeps it without enforcing it); per_seconds counts only with a rate; fair, for a key " +
				"limit, makes claims take turns among its keys, weights (key to weight, 1 to 1,000) giving some more. Runners everywhere " +
				"apply it within a poll interval.",
			handle: c.setLimit},
		{Method: "POST", Pattern: "/api/limits/remove", Action: ActionPause, Body: limitRequest{}, Response: limitsResponse{},
			Summary: "Remove the limit of a scope and target; a runner that declares it writes it again when it starts.",
			handle:  c.removeLimit},
	}
}

func (c *console) listLimits(r *http.Request, _ Access) (int, any, error) {
	ls, err := c.limitViews(r.Context())
	return http.StatusOK, limitsResponse{Limits: ls}, err
}

func (c *console) limitViews(ctx context.Context) ([]limitView, error) {
	ls, err := c.client.Limits(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]limitView, len(ls))
	for i, u := range ls {
		out[i] = limitView{limitRequest: limitRequest{Scope: u.Scope, Target: u.Target, Concurrency: u.Concurrency, Rate: u.Rate,
			PerSeconds: u.Per.Seconds(), Fair: u.Fair, Weights: u.Weights, Suspended: u.Suspended}, By: u.By, ChangedAt: u.ChangedAt, Running: u.Running, Started: u.Started, Key: u.Key,
			Reached: u.Reached(), Use: u.String()}
	}
	return out, nil
}

func (c *console) setLimit(r *http.Request, acc Access) (int, any, error) {
	var req limitRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	if req.Rate == 0 {
		req.PerSeconds = 0
	}
	ch := changeOf(r)
	ch.action, ch.target = "limit", map[string]any{"scope": req.Scope, "target": req.Target, "concurrency": req.Concurrency,
		"rate": req.Rate, "per_seconds": req.PerSeconds, "fair": req.Fair, "weights": req.Weights, "suspended": req.Suspended}
	by := acc.Actor
	if by == "" {
		by = "console"
	}
	l := queue.Limit{Scope: req.Scope, Target: req.Target, Concurrency: req.Concurrency, Rate: req.Rate,
		Per: time.Duration(req.PerSeconds * float64(time.Second)), Fair: req.Fair, Weights: req.Weights, Suspended: req.Suspended, By: by}
	if err := c.client.SetLimit(r.Context(), l); err != nil {
		return 0, nil, err
	}
	return c.listLimits(r, acc)
}

func (c *console) removeLimit(r *http.Request, acc Access) (int, any, error) {
	var req limitRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	ch := changeOf(r)
	ch.action, ch.target = "remove limit", map[string]any{"scope": req.Scope, "target": req.Target}
	err := c.client.RemoveLimit(r.Context(), req.Scope, req.Target)
	if errors.Is(err, queue.ErrNoLimit) {
		return 0, nil, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: err.Error()}
	}
	if err != nil {
		return 0, nil, err
	}
	return c.listLimits(r, acc)
}

// limitsData is the limits page.
type limitsData struct {
	Limits []limitView
	// CanChange shows the buttons that change, suspend, resume and
	// remove limits, and the form that sets them.
	CanChange bool
	// Targets are the kinds and queues the form offers.
	Targets []string
}

func (c *console) limitsHTML(r *http.Request, acc Access) (pageBody, error) {
	ls, err := c.limitViews(r.Context())
	if err != nil {
		return pageBody{}, err
	}
	d := limitsData{Limits: ls, CanChange: acc.Pause}
	if d.CanChange {
		d.Targets = c.reg.Kinds()
		if qs, _, err := c.queuesCache.get(r.Context(), c.cfg.countsTTL, c.client.Queues); err == nil {
			for _, q := range qs {
				if !slices.Contains(d.Targets, q.Name) {
					d.Targets = append(d.Targets, q.Name)
				}
			}
		}
	}
	return pageBody{Title: "Limits", Data: d, LiveMS: liveFast}, nil
}

// limitsHolding says which limits hold QUEUED job j back now.
func (c *console) limitsHolding(ctx context.Context, j jobView) ([]string, error) {
	ls, err := c.client.Limits(ctx)
	if err != nil {
		return nil, err
	}
	return holding(ls, j.Kind, j.Queue, j.LimitKey), nil
}

// holding says which of ls hold back a due job of kind on queue with
// partition key limitKey: those of its kind, its queue, and its key that
// have no room left, as queue.LimitUse.String says them.
func holding(ls []queue.LimitUse, kind, queueName string, limitKey *string) []string {
	key := ""
	if limitKey != nil {
		key = *limitKey
	}
	var out []string
	for _, u := range ls {
		switch {
		case u.Scope == queue.ScopeKind && u.Target == kind, u.Scope == queue.ScopeQueue && u.Target == queueName:
		case u.Scope == queue.ScopeKey && u.Target == kind:
			u.Key, u.Running, u.Started = key, 0, 0
			for _, k := range u.Keys {
				if k.Key == key {
					u.Running, u.Started = k.Running, k.Started
				}
			}
		default:
			continue
		}
		if u.Reached() {
			out = append(out, u.String())
		}
	}
	return out
}
