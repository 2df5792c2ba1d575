package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/alert"
)

// apiError is an error the API answers with: its HTTP status, a code
// clients can branch on, and a message people can read.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Param names the query parameter that could not be read.
	Param string `json:"param,omitempty"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// errorBody is the JSON of every error response.
type errorBody struct {
	Error *apiError `json:"error"`
}

func badRequest(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: "bad_request", Message: fmt.Sprintf(format, args...)}
}

func badParam(param, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: "invalid_param", Param: param, Message: param + ": " + fmt.Sprintf(format, args...)}
}

// queueErrors maps the queue's typed errors to the API's, first match wins.
var queueErrors = []struct {
	err    error
	status int
	code   string
}{
	{queue.ErrUnknownKind, http.StatusUnprocessableEntity, "unknown_kind"},
	{queue.ErrInvalidPayload, http.StatusUnprocessableEntity, "invalid_payload"},
	{queue.ErrInvalidOption, http.StatusBadRequest, "invalid_option"},
	{queue.ErrNotFound, http.StatusNotFound, "not_found"},
	{queue.ErrWrongStatus, http.StatusConflict, "wrong_status"},
	{queue.ErrNotMigrated, http.StatusServiceUnavailable, "not_migrated"},
	{queue.ErrSchemaTooNew, http.StatusServiceUnavailable, "schema_too_new"},
	{ErrReasonTooLong, http.StatusBadRequest, "reason_too_long"},
	{alert.ErrInvalid, http.StatusBadRequest, "invalid"},
	{alert.ErrNotFound, http.StatusNotFound, "not_found"},
	{context.DeadlineExceeded, http.StatusGatewayTimeout, "timeout"},
	{context.Canceled, http.StatusServiceUnavailable, "cancelled"},
}

// toAPIError maps err to what the API answers. Errors it does not know are
// internal: their text, which may hold SQL, is logged, not sent.
func (c *console) toAPIError(r *http.Request, err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
			Message: fmt.Sprintf("the body is over %d bytes", tooBig.Limit)}
	}
	for _, m := range queueErrors {
		if errors.Is(err, m.err) {
			return &apiError{Status: m.status, Code: m.code, Message: err.Error()}
		}
	}
	c.cfg.logger.Error("console: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	return &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error; the server's log has it"}
}

func writeError(w http.ResponseWriter, e *apiError) { writeJSON(w, e.Status, errorBody{Error: e}) }

// writeJSON writes v as the response, with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client may be gone; nothing to do then
}
