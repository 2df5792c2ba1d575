package console

import (
	"context"
	"net/http"
)

// route is one endpoint: the mux is built from the table of them, and so
// is the OpenAPI document, so the two cannot disagree.
type route struct {
	Method, Pattern string
	// Action is what the caller must be allowed; anything but ActionRead
	// changes state, and is refused to other origins' browsers.
	Action  Action
	Summary string
	// Query lists the query parameters; path parameters come from Pattern.
	Query []param
	// Body and Response are values of the request and response types,
	// described in the document by their JSON fields.
	Body, Response any
	// BodyOptional says the request may come without a body.
	BodyOptional bool
	// Statuses are the success statuses; 200 when empty.
	Statuses []int
	handle   handlerFunc
}

// param is a query parameter.
type param struct {
	Name, Doc string
	// Type is the OpenAPI type: string (the default), integer or number;
	// Format, such as date-time, refines it.
	Type, Format string
}

// handlerFunc serves one route for a caller with acc: it returns the
// status and the value to write, or an error to map (toAPIError).
type handlerFunc func(r *http.Request, acc Access) (int, any, error)

// reads is the handler of a GET route whose response f makes from its
// query, read by params.
func reads[T any](params []param, f func(context.Context, query) (T, error)) handlerFunc {
	return func(r *http.Request, _ Access) (int, any, error) {
		q, err := parseQuery(r, params)
		if err != nil {
			return 0, nil, err
		}
		out, err := f(r.Context(), q)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, out, nil
	}
}

// maxBody bounds the JSON body of a request.
const maxBody = 1 << 20

// serve wraps a route's handler with the checks every request passes:
// origin (for changes), authorization, the body's size; and records in the
// audit log what each request that passed them and changes state did.
func (c *console) serve(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt.Action != ActionRead {
			if err := c.csrf.Check(r); err != nil {
				writeError(w, &apiError{Status: http.StatusForbidden, Code: "cross_origin", Message: err.Error()})
				return
			}
		}
		acc := readOnly
		if c.cfg.authorize != nil {
			var err error
			if acc, err = c.cfg.authorize(r); err != nil {
				writeError(w, &apiError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: err.Error()})
				return
			}
		}
		if !acc.Allows(rt.Action) {
			msg := "the caller may not " + string(rt.Action)
			if c.cfg.authorize == nil {
				msg = "the console is read-only: it was built without an authorizer (console.WithAuthorizer)"
			}
			writeError(w, &apiError{Status: http.StatusForbidden, Code: "forbidden", Message: msg})
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		}
		var ch *change
		if rt.Action != ActionRead {
			ch = &change{action: string(rt.Action)}
			r = withChange(r, ch)
		}
		status, body, err := rt.handle(r, acc)
		var failed *apiError
		if err != nil {
			failed = c.toAPIError(r, err)
		}
		if ch != nil {
			c.audit(r, acc, ch, failed)
		}
		if failed != nil {
			writeError(w, failed)
			return
		}
		writeJSON(w, status, body)
	})
}

// table is every route the console serves.
func (c *console) table() []route {
	var rs []route
	rs = append(rs, c.jobRoutes()...)
	rs = append(rs, c.actionRoutes()...)
	rs = append(rs, c.queueRoutes()...)
	rs = append(rs, c.limitRoutes()...)
	rs = append(rs, c.runRoutes()...)
	rs = append(rs, c.infoRoutes()...)
	rs = append(rs, c.auditRoutes()...)
	rs = append(rs, c.historyRoutes()...)
	rs = append(rs, c.alertRoutes()...)
	rs = append(rs, route{Method: "GET", Pattern: "/api/openapi.json", Action: ActionRead,
		Summary:  "This document: every route, generated from the table the server is built from.",
		Response: map[string]any{}, handle: c.openAPI})
	return rs
}
