package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/sheaf-dev/sheaf/queue/alert"
)

// WithAlerts shows the alerts of a (package queue/alert): its episodes,
// firing and resolved, and its silences, on an Alerts page and under
// /api/alerts, where callers allowed ActionSilence silence a rule and
// remove silences. The console only reads and writes the alerts' state in
// the database; it does not run a (a runner's maintenance does).
func WithAlerts(a *alert.Alerter) Option {
	return func(c *config) error {
		if a == nil {
			return errors.New("console: nil *alert.Alerter")
		}
		c.alerts = a
		return nil
	}
}

// episodeView is an alert episode.
type episodeView struct {
	ID         int64      `json:"id"`
	Rule       string     `json:"rule"`
	Key        string     `json:"key"`
	State      string     `json:"state"`
	Kind       string     `json:"kind,omitempty"`
	Queue      string     `json:"queue,omitempty"`
	Summary    string     `json:"summary"`
	StartedAt  time.Time  `json:"started_at"`
	FiredAt    *time.Time `json:"fired_at"`
	ResolvedAt *time.Time `json:"resolved_at"`
	// Notified is false for a firing episode a silence mutes.
	Notified bool `json:"notified"`
}

type alertsResponse struct {
	Episodes []episodeView `json:"episodes"`
	// NextBefore continues the listing (before=); 0 at the end.
	NextBefore int64 `json:"next_before"`
}

// silenceView is a silence in force.
type silenceView struct {
	ID        int64     `json:"id"`
	Rule      string    `json:"rule"`
	Kind      string    `json:"kind,omitempty"`
	Queue     string    `json:"queue,omitempty"`
	Until     time.Time `json:"until"`
	Actor     string    `json:"actor"`
	Reason    string    `json:"reason,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

type silencesResponse struct {
	Silences []silenceView `json:"silences"`
}

// silenceRequest silences a rule, for a kind or a queue if given, for
// Minutes minutes or until Until; give one.
type silenceRequest struct {
	Rule    string     `json:"rule"`
	Kind    string     `json:"kind,omitempty"`
	Queue   string     `json:"queue,omitempty"`
	Minutes int        `json:"minutes,omitempty"`
	Until   *time.Time `json:"until,omitempty"`
	Reason  string     `json:"reason,omitempty"`
}

type silenceResponse struct {
	Silence silenceView `json:"silence"`
}

// maxSilence bounds how long one silence lasts.
const maxSilence = 30 * 24 * time.Hour

var alertParams = []param{
	{Name: "state", Type: "list", Doc: "Episode states to keep: pending, firing, resolved, once (digests); all if absent."},
	{Name: "before", Type: "integer", Doc: "Continue a listing: episodes with IDs below this (next_before)."},
	{Name: "limit", Type: "integer", Doc: "At most this many episodes, 1 to 1000; default 100."},
}

func (c *console) alertRoutes() []route {
	if c.cfg.alerts == nil {
		return nil
	}
	return []route{
		{Method: "GET", Pattern: "/api/alerts", Action: ActionRead, Query: alertParams, Response: alertsResponse{},
			Summary: "Alert episodes, newest first: what fired, what resolved, and what a silence mutes (notified false).",
			handle:  reads(alertParams, c.alertEpisodes)},
		{Method: "GET", Pattern: "/api/alerts/silences", Action: ActionRead, Response: silencesResponse{},
			Summary: "The silences in force.",
			handle:  reads(nil, c.alertSilences)},
		{Method: "POST", Pattern: "/api/alerts/silences", Action: ActionSilence, Body: silenceRequest{}, Response: silenceResponse{},
			Statuses: []int{http.StatusCreated},
			Summary: "Silence a rule's notices (for a kind or a queue, if given) for some minutes or until a time, " +
				"at most 30 days. The caller's Actor is recorded with it.",
			handle: c.silence},
		{Method: "POST", Pattern: "/api/alerts/silences/{id}/delete", Action: ActionSilence, Response: struct{}{},
			Summary: "Remove a silence (404 not_found if there is none): episodes it muted that still fire are announced at the next round.",
			handle:  c.unsilence},
	}
}

func (c *console) alertEpisodes(ctx context.Context, q query) (alertsResponse, error) {
	before, err := q.int("before", 0, 0, 1<<62)
	if err != nil {
		return alertsResponse{}, err
	}
	limit, err := q.int("limit", 100, 1, 1000)
	if err != nil {
		return alertsResponse{}, err
	}
	eps, err := c.cfg.alerts.Episodes(ctx, alert.EpisodeQuery{States: q.list("state"), BeforeID: int64(before), Limit: limit})
	if err != nil {
		return alertsResponse{}, err
	}
	out := alertsResponse{Episodes: make([]episodeView, 0, len(eps))}
	for _, e := range eps {
		out.Episodes = append(out.Episodes, episodeView(e))
	}
	if len(eps) == limit {
		out.NextBefore = eps[len(eps)-1].ID
	}
	return out, nil
}

func (c *console) alertSilences(ctx context.Context, _ query) (silencesResponse, error) {
	ss, err := c.cfg.alerts.Silences(ctx)
	if err != nil {
		return silencesResponse{}, err
	}
	out := silencesResponse{Silences: make([]silenceView, 0, len(ss))}
	for _, s := range ss {
		out.Silences = append(out.Silences, silenceView(s))
	}
	return out, nil
}

func (c *console) silence(r *http.Request, acc Access) (int, any, error) {
	var req silenceRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	ch := changeOf(r)
	ch.target = map[string]any{"rule": req.Rule, "kind": req.Kind, "queue": req.Queue}
	now := time.Now()
	var until time.Time
	switch {
	case (req.Minutes != 0) == (req.Until != nil):
		return 0, nil, badRequest("give minutes or until, one of them")
	case req.Minutes != 0:
		if req.Minutes < 1 || time.Duration(req.Minutes)*time.Minute > maxSilence {
			return 0, nil, badRequest("minutes: from 1 to %d", int(maxSilence/time.Minute))
		}
		until = now.Add(time.Duration(req.Minutes) * time.Minute)
	default:
		until = *req.Until
		if until.Sub(now) > maxSilence {
			return 0, nil, badRequest("until: at most 30 days ahead")
		}
	}
	actor := acc.Actor
	if actor == "" {
		actor = r.RemoteAddr
	}
	s := alert.Silence{Rule: req.Rule, Kind: req.Kind, Queue: req.Queue, Until: until, Actor: actor, Reason: req.Reason}
	id, err := c.cfg.alerts.Silence(r.Context(), s)
	if err != nil {
		return 0, nil, err
	}
	ch.target["silence"], ch.changed = id, 1
	s.ID, s.CreatedAt = id, now
	return http.StatusCreated, silenceResponse{Silence: silenceView(s)}, nil
}

func (c *console) unsilence(r *http.Request, _ Access) (int, any, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, nil, badParam("id", "not a silence's ID")
	}
	ch := changeOf(r)
	ch.action, ch.target = "unsilence", map[string]any{"silence": id}
	if err := c.cfg.alerts.Unsilence(r.Context(), id); err != nil {
		return 0, nil, err
	}
	ch.changed = 1
	return http.StatusOK, struct{}{}, nil
}

// alertsData is the Alerts page: what fires, what a silence mutes, the
// silences, and what resolved lately.
type alertsData struct {
	Firing, Muted []alertRow
	Resolved      []episodeView
	Silences      []silenceView
}

// alertRow is an open episode and the bodies of the requests that silence
// its rule for an hour: for its kind or queue, or for all of it.
type alertRow struct {
	episodeView
	SilenceRule, SilenceNarrow string
}

// silenceBody is the JSON body of a request to silence ep's rule for an
// hour, narrowed to its kind and queue or not.
func silenceBody(ep episodeView, narrow bool) string {
	req := silenceRequest{Rule: ep.Rule, Minutes: 60, Reason: "from the Alerts page"}
	if narrow {
		req.Kind, req.Queue = ep.Kind, ep.Queue
	}
	b, _ := json.Marshal(req) // strings and a number always marshal
	return string(b)
}

// recentResolved is how many resolved episodes the Alerts page shows.
const recentResolved = 50

func (c *console) alertsHTML(r *http.Request, _ Access) (pageBody, error) {
	ctx := r.Context()
	open, err := c.alertEpisodes(ctx, query{vals: map[string][]string{"state": {alert.StateFiring}, "limit": {"1000"}}})
	if err != nil {
		return pageBody{}, err
	}
	var d alertsData
	for _, e := range open.Episodes {
		row := alertRow{episodeView: e, SilenceRule: silenceBody(e, false)}
		if e.Kind != "" || e.Queue != "" {
			row.SilenceNarrow = silenceBody(e, true)
		}
		if e.Notified {
			d.Firing = append(d.Firing, row)
		} else {
			d.Muted = append(d.Muted, row)
		}
	}
	resolved, err := c.alertEpisodes(ctx, query{vals: map[string][]string{"state": {alert.StateResolved}, "limit": {strconv.Itoa(recentResolved)}}})
	if err != nil {
		return pageBody{}, err
	}
	d.Resolved = resolved.Episodes
	ss, err := c.alertSilences(ctx, query{})
	if err != nil {
		return pageBody{}, err
	}
	d.Silences = ss.Silences
	return pageBody{Title: "Alerts", Data: d, LiveMS: liveSlow}, nil
}
