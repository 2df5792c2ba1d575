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
	paths := map[string]any{}
	for _, rt := range c.routes {
		ops, _ := paths[rt.Pattern].(map[string]any)
		if ops == nil {
			ops = map[string]any{}
			paths[rt.Pattern] = ops
		}
		ops[strings.ToLower(rt.Method)] = operation(rt)
	}
	return map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{
			"title":   "sheaf console",
			"version": "1",
			"description": "Operations API of a sheaf job queue. Errors are " +
				`{"error":{"code":"…","message":"…"}}; requests that change state need the authorizer's leave ` +
				"(x-sheaf-action) and are refused to browsers on other origins.",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas": map[string]any{"Error": schemaOf(reflect.TypeFor[errorBody]())},
		},
	}
}

func operation(rt route) map[string]any {
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
		"default": map[string]any{"description": "An error.", "content": jsonContent(map[string]any{"$ref": "#/components/schemas/Error"})},
	}
	for _, st := range statuses {
		responses[strconv.Itoa(st)] = map[string]any{"description": http.StatusText(st),
			"content": jsonContent(schemaOf(reflect.TypeOf(rt.Response)))}
	}
	op := map[string]any{
		"operationId":    operationID(rt),
		"summary":        rt.Summary,
		"x-sheaf-action": string(rt.Action),
		"responses":      responses,
	}
	if params != nil {
		op["parameters"] = params
	}
	if rt.Body != nil {
		op["requestBody"] = map[string]any{"required": true, "content": jsonContent(schemaOf(reflect.TypeOf(rt.Body)))}
	}
	return op
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

// schemaOf describes how encoding/json writes a value of t.
func schemaOf(t reflect.Type) map[string]any {
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
		s := schemaOf(t.Elem())
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
			props[name] = schemaOf(f.Type)
		}
		return map[string]any{"type": "object", "properties": props}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem())}
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
