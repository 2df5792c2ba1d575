package console

import (
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// auditTimeout bounds the write of an audit entry, which outlives a
// request whose client has gone.
const auditTimeout = 5 * time.Second

// change is what a request that changes state did, for the audit log
// (queue.Client.RecordAudit): serve makes one for the request, its handler
// says what it acts on and how many jobs changed, and serve records it
// with the result once the handler returns.
type change struct {
	// action is the route's Action, or what the handler names it
	// ("resume" is done with ActionPause's leave).
	action string
	// target is what the request acts on, as JSON: {"job":…}, {"ids":[…]},
	// {"filter":{…}}, {"queue":…}; nil until the handler knows.
	target  map[string]any
	changed int64
	// recorded, if set, is told the audit entry's ID once it is written.
	recorded func(id int64)
}

type changeKey struct{}

// changeOf returns the change of a request, to fill in; a request that
// changes nothing gets one that nobody records.
func changeOf(r *http.Request) *change {
	if ch, ok := r.Context().Value(changeKey{}).(*change); ok {
		return ch
	}
	return &change{}
}

// withChange returns r carrying ch, for its handler to fill in.
func withChange(r *http.Request, ch *change) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), changeKey{}, ch))
}

// audit records the change a request made, or tried to: who (the Actor of
// its access, else its remote address), what, to which jobs, its result
// ("ok", or the code of the error it was answered with) and how many jobs
// changed. A failure to record is logged, and does not change the answer.
func (c *console) audit(r *http.Request, acc Access, ch *change, failed *apiError) {
	e := queue.AuditEntry{Actor: acc.Actor, Action: ch.action, Result: "ok", Changed: ch.changed}
	if e.Actor == "" {
		// The address without its port, which changes with every
		// connection: one caller reads as one "who".
		e.Actor = r.RemoteAddr
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			e.Actor = host
		}
	}
	if failed != nil {
		e.Result = failed.Code
	}
	if ch.target != nil {
		e.Target, _ = json.Marshal(ch.target) // maps of IDs, names and filters always marshal
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), auditTimeout)
	defer cancel()
	id, err := c.client.RecordAudit(ctx, e)
	if errors.Is(err, queue.ErrInvalidOption) && e.Target != nil {
		// A target the database cannot store as given (a NUL in a refused
		// filter): record the rest.
		e.Target = nil
		id, err = c.client.RecordAudit(ctx, e)
	}
	if err == nil && ch.recorded != nil {
		ch.recorded(id)
	}
	if err != nil {
		c.cfg.logger.Error("console: the audit log did not take a change", "err", err, "actor", e.Actor,
			"action", e.Action, "target", ch.target, "result", e.Result, "changed", e.Changed)
	}
}

var auditParams = []param{
	{Name: "cursor", Doc: "The next_cursor of the previous page."},
	{Name: "limit", Type: "integer", Doc: "Entries per page: 1 to 500, default 50."},
}

// auditView is an entry of the audit log.
type auditView struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	// Target is what the request acted on: {"job":…}, {"ids":[…]},
	// {"filter":{…}}, {"queue":…}; null when the request was refused
	// before that was known.
	Target json.RawMessage `json:"target"`
	// Result is "ok", or the code of the error the request was answered
	// with.
	Result  string `json:"result"`
	Changed int64  `json:"changed"`
	// Reason is why, as the request gave it (a cancel's reason, also in
	// Target); absent when it gave none.
	Reason string `json:"reason,omitempty"`
}

type auditResponse struct {
	Entries    []auditView `json:"entries"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// auditCursor is where a listing of the audit log continues: before the
// last entry of the previous page.
type auditCursor struct {
	Before int64 `json:"b"`
}

// auditLink is the path, from the console's root, of the audit page that
// starts at entry id, which the fragment points at.
func auditLink(id int64) string {
	return "audit?cursor=" + encodeCursor(auditCursor{Before: id + 1}) + "#audit-" + strconv.FormatInt(id, 10)
}

func (c *console) auditRoutes() []route {
	return []route{
		{Method: "GET", Pattern: "/api/audit", Action: ActionRead, Query: auditParams, Response: auditResponse{},
			Summary: "The audit log, newest first: every request that changed state or tried to " +
				"(not those refused with 401 or 403), who made it, on what, and how it went.",
			handle: reads(auditParams, c.auditPage)},
	}
}

// auditPage is the page of the audit log that q (auditParams) selects.
func (c *console) auditPage(ctx context.Context, q query) (auditResponse, error) {
	limit, err := q.int("limit", defaultLimit, 1, maxLimit)
	if err != nil {
		return auditResponse{}, err
	}
	var cur auditCursor
	if s := q.str("cursor"); s != "" {
		if err := decodeCursor("cursor", s, &cur); err != nil {
			return auditResponse{}, err
		}
		if cur.Before < 1 {
			return auditResponse{}, badParam("cursor", "not a cursor this server wrote")
		}
	}
	entries, err := c.client.AuditLog(ctx, cur.Before, limit+1)
	if err != nil {
		return auditResponse{}, err
	}
	out := auditResponse{Entries: []auditView{}}
	if len(entries) > limit {
		entries = entries[:limit]
		out.NextCursor = encodeCursor(auditCursor{Before: entries[limit-1].ID})
	}
	for _, e := range entries {
		v := auditView{ID: e.ID, At: e.At, Actor: e.Actor, Action: e.Action, Target: e.Target, Result: e.Result, Changed: e.Changed,
			Reason: reasonOf(e.Target)}
		if len(v.Target) == 0 {
			v.Target = json.RawMessage("null")
		}
		out.Entries = append(out.Entries, v)
	}
	return out, nil
}

// auditTarget says in words what an audit entry acted on, linking the
// jobs, the jobs a filter selects and the queue; a target it does not
// know is shown as its JSON.
func auditTarget(raw json.RawMessage) template.HTML {
	var t struct {
		Job       *int64      `json:"job"`
		IDs       []int64     `json:"ids"`
		Filter    *filterBody `json:"filter"`
		Queue     *string     `json:"queue"`
		Kind      *string     `json:"kind"`
		Rule      *string     `json:"rule"`
		Silence   *int64      `json:"silence"`
		Duplicate bool        `json:"duplicate"`
		Reason    string      `json:"reason"`
	}
	if len(raw) == 0 || string(raw) == "null" {
		return "—"
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return template.HTML("<code>" + template.HTMLEscapeString(string(raw)) + "</code>")
	}
	esc := template.HTMLEscapeString
	jobLink := func(id int64) string {
		n := strconv.FormatInt(id, 10)
		return `<a href="jobs/` + n + `">#` + n + `</a>`
	}
	var parts []string
	if t.Kind != nil && t.Rule == nil {
		parts = append(parts, "a "+esc(*t.Kind)+" job")
	}
	if t.Job != nil {
		what := "job " + jobLink(*t.Job)
		if t.Duplicate {
			what += " (already there: a duplicate)"
		}
		parts = append(parts, what)
	}
	if len(t.IDs) > 0 {
		const shown = 10
		links := make([]string, 0, shown)
		for _, id := range t.IDs[:min(len(t.IDs), shown)] {
			links = append(links, jobLink(id))
		}
		what := "jobs " + strings.Join(links, ", ")
		if len(t.IDs) > shown {
			what += " and " + strconv.Itoa(len(t.IDs)-shown) + " more"
		}
		parts = append(parts, what)
	}
	if t.Filter != nil {
		f := t.Filter
		statuses := make([]string, len(f.Statuses))
		for i, s := range f.Statuses {
			statuses[i] = string(s)
		}
		href := link("jobs", "kind", f.Kinds, "queue", f.Queue, "run", f.Run, "period", f.Period,
			"correlation", f.Correlation, "q", f.Q, "status", statuses)
		parts = append(parts, `<a href="`+esc(href)+`">`+esc(filterWords(*f))+`</a>`)
	}
	if t.Rule != nil || t.Silence != nil {
		var alert []string
		for _, p := range []struct {
			name string
			v    *string
		}{{"rule", t.Rule}, {"kind", t.Kind}, {"queue", t.Queue}} {
			if p.v != nil && *p.v != "" {
				alert = append(alert, p.name+" "+esc(*p.v))
			}
		}
		if t.Silence != nil {
			alert = append(alert, "silence #"+strconv.FormatInt(*t.Silence, 10))
		}
		parts = append(parts, "alerts of "+strings.Join(alert, ", "))
	} else if t.Queue != nil {
		parts = append(parts, `queue <a href="`+esc(link("jobs", "queue", *t.Queue))+`">`+esc(*t.Queue)+`</a>`)
	}
	if len(parts) == 0 {
		return template.HTML("<code>" + esc(string(raw)) + "</code>")
	}
	if t.Reason != "" {
		parts = append(parts, `<span data-reason>because “`+esc(t.Reason)+`”</span>`)
	}
	return template.HTML(strings.Join(parts, "; "))
}
