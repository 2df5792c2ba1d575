package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// MaxReason is the longest reason a cancel takes, in characters.
const MaxReason = 500

// ErrReasonTooLong is wrapped by the error for a cancel's reason of more
// than MaxReason characters; the API answers it with 400 reason_too_long.
var ErrReasonTooLong = errors.New("reason too long")

// CheckReason returns reason without its surrounding spaces, or an error
// wrapping ErrReasonTooLong if that is over MaxReason characters. A
// cancel records its reason in its audit entry's target, as
// {"job": 5, "reason": "…"}, beside what it acted on; the sheaf command
// does the same.
func CheckReason(reason string) (string, error) {
	reason = strings.TrimSpace(reason)
	if n := utf8.RuneCountInString(reason); n > MaxReason {
		return "", fmt.Errorf("%w: %d characters, at most %d", ErrReasonTooLong, n, MaxReason)
	}
	return reason, nil
}

// reasonOf is the reason an audit entry's target records; "" if none.
func reasonOf(target json.RawMessage) string {
	var t struct {
		Reason string `json:"reason"`
	}
	if json.Unmarshal(target, &t) != nil {
		return ""
	}
	return t.Reason
}

// cancelOneRequest is the optional body of a cancel of one job.
type cancelOneRequest struct {
	// Reason says why, in at most 500 characters; the audit entry records
	// it, and the job's page shows it.
	Reason string `json:"reason,omitempty"`
}

// cancelOne serves the cancel of the job of the path, with the reason of
// the body, if it has one.
func (c *console) cancelOne(r *http.Request, acc Access) (int, any, error) {
	var req cancelOneRequest
	if r.ContentLength != 0 {
		if err := decodeBody(r, &req); err != nil {
			return 0, nil, err
		}
	}
	reason, err := CheckReason(req.Reason)
	if err != nil {
		return 0, nil, err
	}
	return withReason(r, reason)(c.oneJob(c.client.Cancel)(r, acc))
}

// withReason returns a function that adds reason to the audit target of
// the request r once its handler has named it, and passes the handler's
// answer on.
func withReason(r *http.Request, reason string) func(int, any, error) (int, any, error) {
	return func(st int, v any, err error) (int, any, error) {
		if ch := changeOf(r); ch.target != nil && reason != "" {
			ch.target["reason"] = reason
		}
		return st, v, err
	}
}
