package console

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxParam bounds a query parameter's value, in bytes.
const maxParam = 512

// query is a request's query parameters, read strictly: a parameter the
// route does not list, given twice, or not of its type is a bad-param
// error that names it.
type query struct{ vals url.Values }

// parseQuery reads r's query for a route whose parameters are known; those
// of type "list" may be repeated or hold values separated by commas.
func parseQuery(r *http.Request, known []param) (query, error) {
	vals, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return query{}, badParam("query", "%v", err)
	}
	return readQuery(vals, known)
}

// readQuery reads vals as parseQuery reads a request's query.
func readQuery(vals url.Values, known []param) (query, error) {
	for name, vs := range vals {
		i := slices.IndexFunc(known, func(p param) bool { return p.Name == name })
		if i < 0 {
			return query{}, badParam(name, "unknown parameter")
		}
		if len(vs) > 1 && known[i].Type != "list" {
			return query{}, badParam(name, "given %d times", len(vs))
		}
		for _, v := range vs {
			if err := checkParam(name, v); err != nil {
				return query{}, err
			}
		}
	}
	return query{vals}, nil
}

// checkParam refuses a value the database could not compare as text.
func checkParam(name, v string) error {
	switch {
	case len(v) > maxParam:
		return badParam(name, "longer than %d bytes", maxParam)
	case !utf8.ValidString(v):
		return badParam(name, "not UTF-8")
	case strings.IndexByte(v, 0) >= 0:
		return badParam(name, "holds a NUL")
	}
	return nil
}

// str returns the parameter, or "".
func (q query) str(name string) string { return q.vals.Get(name) }

// list returns the parameter's values: repeated, or separated by commas.
func (q query) list(name string) []string {
	var out []string
	for _, v := range q.vals[name] {
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// time returns the parameter as an RFC 3339 time; zero if absent.
func (q query) time(name string) (time.Time, error) {
	v := q.str(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, badParam(name, "not an RFC 3339 time such as 2025-12-08T23:00:00+05:30")
	}
	return t, nil
}

// int returns the parameter as an integer in [lo, hi], or def if absent.
func (q query) int(name string, def, lo, hi int) (int, error) {
	v := q.str(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, badParam(name, "not a whole number from %d to %d", lo, hi)
	}
	return n, nil
}

// float returns the parameter as a number at least lo, or 0 if absent.
func (q query) float(name string, lo float64) (float64, error) {
	v := q.str(name)
	if v == "" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= lo) || f > 1e6 {
		return 0, badParam(name, "not a number from %g to 1e6", lo)
	}
	return f, nil
}

// duration returns the parameter as a Go duration ("90s", "5m") from lo to
// hi, or def if absent.
func (q query) duration(name string, def, lo, hi time.Duration) (time.Duration, error) {
	v := q.str(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < lo || d > hi {
		return 0, badParam(name, "not a duration such as 90s or 5m, from %v to %v", lo, hi)
	}
	return d, nil
}
