package console

import (
	"net/http"
	"strings"
)

// requestCorrelation returns the correlation ID a request carries: the
// trace ID of its W3C traceparent header, or else its X-Correlation-ID
// header; "" if neither.
func requestCorrelation(r *http.Request) string {
	if id, ok := traceID(r.Header.Get("traceparent")); ok {
		return id
	}
	return strings.TrimSpace(r.Header.Get("X-Correlation-ID"))
}

// traceID returns the trace ID of a traceparent header
// (version-traceid-parentid-flags, in lower-case hex), if it is well formed:
// https://www.w3.org/TR/trace-context/#traceparent-header.
func traceID(h string) (string, bool) {
	parts := strings.Split(strings.TrimSpace(h), "-")
	if len(parts) < 4 {
		return "", false
	}
	version, trace, parent, flags := parts[0], parts[1], parts[2], parts[3]
	switch {
	case !lowerHex(version, 2) || version == "ff",
		version == "00" && len(parts) != 4,
		!lowerHex(trace, 32) || strings.Trim(trace, "0") == "",
		!lowerHex(parent, 16) || strings.Trim(parent, "0") == "",
		!lowerHex(flags, 2):
		return "", false
	}
	return trace, true
}

func lowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
