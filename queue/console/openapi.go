package console

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The OpenAPI 3.0 document is built from the route table, the same the mux
// is built from, and the JSON shapes from the Go types of each route's
// body and response.

// pathParam matches a wildcard of a route's pattern, which OpenAPI writes
// the same way.
var pathParam = regexp.MustCompile(`\{(\w+)\}`)

func (c *console) openAPI(*http.Request, Access) (int, any, error) {
	return http.StatusOK, c.document(), nil
}

// document is the OpenAPI document of the console's routes.
func (c *console) document() map[string]any {
	sc := schemas{}
	paths := map[string]any{}
	var tags []any
	seen := map[string]bool{}
	for _, rt := range c.routes {
		if tag := tagOf(rt); !seen[tag] {
			seen[tag] = true
			tags = append(tags, map[string]any{"name": tag, "description": "The routes under /api/" + tag + "."})
		}
		ops, _ := paths[rt.Pattern].(map[string]any)
		if ops == nil {
			ops = map[string]any{}
			paths[rt.Pattern] = ops
		}
		ops[strings.ToLower(rt.Method)] = sc.operation(rt)
	}
	sc.of(reflect.TypeFor[errorBody]())
	responses := map[string]any{}
	for _, e := range errorStatuses {
		responses[e.name] = map[string]any{"description": e.doc, "content": jsonContent(ref("Error"))}
	}
	return map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{
			"title":   "sheaf console",
			"version": "1",
			"description": "Operations API of a sheaf job queue. Errors are " +
				`{"error":{"code":"…","message":"…"}}; requests that change state need the authorizer's leave ` +
				"(x-sheaf-action) and are refused to browsers on other origins.",
			"license": map[string]any{"name": "See the sheaf repository", "url": "https://github.com/sheaf-dev/sheaf"},
			"contact": map[string]any{"name": "sheaf", "url": "https://github.com/sheaf-dev/sheaf"},
		},
		"tags":    tags,
		"servers": []any{map[string]any{"url": "/", "description": "The console's root, wherever it is mounted."}},
		"paths":   paths,
		// The application's Authorizer decides who a caller is, from
		// whatever the request carries: the two usual carriers are
		// declared, and neither is required (a console without an
		// authorizer lets anyone read).
		"security": []any{map[string]any{}, map[string]any{"bearer": []any{}}, map[string]any{"session": []any{}}},
		"components": map[string]any{
			"schemas":   map[string]any(sc),
			"responses": responses,
			"securitySchemes": map[string]any{
				"bearer": map[string]any{"type": "http", "scheme": "bearer",
					"description": "A token the application's Authorizer (console.WithAuthorizer) checks."},
				"session": map[string]any{"type": "apiKey", "in": "cookie", "name": "session",
					"description": "A session cookie the application's Authorizer checks; its name is the application's."},
			},
		},
	}
}

// errorStatuses are the error responses an operation may give, shared
// as components.responses, and when.
var errorStatuses = []struct {
	status int
	name   string
	doc    string
	// applies says whether a route can answer with the status.
	applies func(rt route) bool
}{
	{http.StatusBadRequest, "BadRequest", "A parameter or the body could not be read, or a cancel's reason is too long (invalid_param, bad_request, reason_too_long).",
		func(rt route) bool { return len(rt.Query) > 0 || rt.Body != nil || pathParam.MatchString(rt.Pattern) }},
	{http.StatusUnauthorized, "Unauthorized", "The authorizer refused the caller (unauthorized).",
		func(route) bool { return true }},
	{http.StatusForbidden, "Forbidden", "The caller may not do this, the console is read-only, or a browser on another origin sent it (forbidden, cross_origin).",
		func(route) bool { return true }},
	{http.StatusNotFound, "NotFound", "No such job, run, queue or silence (not_found).",
		func(rt route) bool { return pathParam.MatchString(rt.Pattern) }},
	{http.StatusConflict, "Conflict", "The job is in a status that does not allow this (wrong_status).",
		func(rt route) bool { return rt.Action == ActionCancel || rt.Action == ActionRetry }},
	{http.StatusUnprocessableEntity, "Unprocessable", "The kind is unknown or the arguments do not fit it (unknown_kind, invalid_payload).",
		func(rt route) bool { return rt.Action == ActionSubmit }},
	{http.StatusServiceUnavailable, "Unavailable", "The database is not migrated, or did not answer (not_migrated, schema_too_new, cancelled).",
		func(route) bool { return true }},
}

// schemas are the document's shared component schemas, by name: every
// named struct type of a body or response.
type schemas map[string]any

func (sc schemas) operation(rt route) map[string]any {
	var params []any
	for _, m := range pathParam.FindAllStringSubmatch(rt.Pattern, -1) {
		params = append(params, map[string]any{"name": m[1], "in": "path", "required": true,
			"schema": map[string]any{"type": "string"}})
	}
	for _, p := range rt.Query {
		s := map[string]any{"type": "string"}
		switch p.Type {
		case "integer", "number":
			s["type"] = p.Type
		case "list":
			s = map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
		}
		if p.Format != "" {
			s["format"] = p.Format
		}
		q := map[string]any{"name": p.Name, "in": "query", "description": p.Doc, "schema": s}
		if p.Type == "list" {
			q["style"], q["explode"] = "form", true
		}
		params = append(params, q)
	}
	statuses := rt.Statuses
	if len(statuses) == 0 {
		statuses = []int{http.StatusOK}
	}
	responses := map[string]any{
		"default": map[string]any{"description": "An error.", "content": jsonContent(ref("Error"))},
	}
	for _, e := range errorStatuses {
		if e.applies(rt) {
			responses[strconv.Itoa(e.status)] = map[string]any{"$ref": "#/components/responses/" + e.name}
		}
	}
	for _, st := range statuses {
		responses[strconv.Itoa(st)] = map[string]any{"description": http.StatusText(st),
			"content": jsonContent(sc.of(reflect.TypeOf(rt.Response)))}
	}
	op := map[string]any{
		"operationId":    operationID(rt),
		"summary":        rt.Summary,
		"description":    rt.Summary + " It needs the caller's leave to " + string(rt.Action) + ".",
		"x-sheaf-action": string(rt.Action),
		"tags":           []any{tagOf(rt)},
		"responses":      responses,
	}
	if params != nil {
		op["parameters"] = params
	}
	if rt.Body != nil {
		op["requestBody"] = map[string]any{"required": !rt.BodyOptional, "content": jsonContent(sc.of(reflect.TypeOf(rt.Body)))}
	}
	return op
}

// tagOf groups a route by the first segment of its path: jobs, runs…
func tagOf(rt route) string {
	seg, _, _ := strings.Cut(strings.TrimPrefix(rt.Pattern, "/api/"), "/")
	return strings.TrimSuffix(seg, ".json")
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

// schemaNames names the component schemas of the console's types; other
// named structs are named after their type.
var schemaNames = map[reflect.Type]string{
	reflect.TypeFor[jobView]():      "Job",
	reflect.TypeFor[attemptView]():  "Attempt",
	reflect.TypeFor[queueView]():    "Queue",
	reflect.TypeFor[runView]():      "Run",
	reflect.TypeFor[reviewView]():   "Review",
	reflect.TypeFor[errorBody]():    "Error",
	reflect.TypeFor[apiError]():     "ErrorDetail",
	reflect.TypeFor[filterBody]():   "Filter",
	reflect.TypeFor[progressView](): "Progress",
}

// of describes how encoding/json writes a value of t: a named struct
// type as a reference to its component schema, which it adds.
func (sc schemas) of(t reflect.Type) map[string]any {
	if t != nil && t.Kind() == reflect.Struct && t.Name() != "" && t != timeType {
		name := schemaNames[t]
		if name == "" {
			name = strings.ToUpper(t.Name()[:1]) + t.Name()[1:]
		}
		if _, ok := sc[name]; !ok {
			sc[name] = map[string]any{} // a type that refers to itself stops here
			sc[name] = sc.schemaOf(t)
		}
		return ref(name)
	}
	return sc.schemaOf(t)
}

func jsonContent(schema any) map[string]any {
	return map[string]any{"application/json": map[string]any{"schema": schema}}
}

// operationID names a route after its method and path: GET /api/jobs/{id}
// is getJobsById.
func operationID(rt route) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(rt.Method))
	for seg := range strings.SplitSeq(strings.TrimPrefix(rt.Pattern, "/api/"), "/") {
		if m := pathParam.FindStringSubmatch(seg); m != nil {
			seg = "by_" + m[1]
		}
		for part := range strings.FieldsFuncSeq(seg, func(r rune) bool { return r == '_' || r == '.' || r == '-' }) {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// schemaOf describes how encoding/json writes a value of t, its named
// struct types by reference (of).
func (sc schemas) schemaOf(t reflect.Type) map[string]any {
	switch {
	case t == nil:
		return map[string]any{}
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == rawType:
		return map[string]any{"description": "Any JSON value."}
	}
	switch t.Kind() {
	case reflect.Pointer:
		s := sc.of(t.Elem())
		if _, isRef := s["$ref"]; isRef {
			// A reference takes no siblings in OpenAPI 3.0.
			return map[string]any{"type": "object", "allOf": []any{s}, "nullable": true}
		}
		s["nullable"] = true
		return s
	case reflect.Struct:
		props := map[string]any{}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			props[name] = sc.of(f.Type)
		}
		return map[string]any{"type": "object", "properties": props}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": sc.of(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": sc.of(t.Elem())}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer", "format": "int64"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	}
	return map[string]any{}
}
