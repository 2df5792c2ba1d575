package console

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
)

// decodeBody reads the request's JSON body into v: one JSON value, with no
// field v does not have, within maxBody (serve limits the reader).
func decodeBody(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" && !strings.HasSuffix(mt, "+json") {
			return &apiError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
				Message: "the body must be JSON (Content-Type: application/json), not " + ct}
		}
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(err)
	}
	if err := dec.Decode(&json.RawMessage{}); !errors.Is(err, io.EOF) {
		if err != nil {
			return bodyError(err)
		}
		return badRequest("the body holds more than one JSON value")
	}
	return nil
}

// bodyError says what is wrong with a body that did not decode.
func bodyError(err error) error {
	var tooBig *http.MaxBytesError
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooBig):
		return err
	case errors.Is(err, io.EOF):
		return badRequest("the body is empty; it must be a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("the body ends in the middle of its JSON")
	case errors.As(err, &syntax):
		return badRequest("the body is not JSON: %v (at byte %d)", err, syntax.Offset)
	case errors.As(err, &typ):
		return badRequest("field %q: a JSON %s where %v was expected", typ.Field, typ.Value, typ.Type)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return &apiError{Status: http.StatusBadRequest, Code: "unknown_field", Message: "unknown field " + field}
	}
	return badRequest("the body does not decode: %v", err)
}
