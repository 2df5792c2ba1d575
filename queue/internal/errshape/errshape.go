// Package errshape reduces error messages to their shape, so that errors
// that differ only in IDs, addresses and counts group together: the
// console's failure groups and the day roll-ups' failures by error.
package errshape

import (
	"regexp"
	"strings"
)

// What Of takes out of an error message, in this order.
var (
	uuidRE = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	hexRE  = regexp.MustCompile(`(?i)\b0x[0-9a-f]+\b|\b[0-9a-f]{8,}\b`)
	numRE  = regexp.MustCompile(`\d+`)
)

// Of reduces an error message to its shape: UUIDs become <uuid>,
// hex strings (0x…, or eight or more hex digits) <hex> and numbers <n>, so that errors that differ only in
// IDs, addresses and counts read the same.
func Of(msg string) string {
	msg = uuidRE.ReplaceAllString(msg, "<uuid>")
	msg = hexRE.ReplaceAllStringFunc(msg, func(s string) string {
		if strings.HasPrefix(strings.ToLower(s), "0x") || strings.ContainsAny(s, "0123456789") {
			return "<hex>"
		}
		return s // letters only, such as "acceded": a word, not an ID
	})
	return numRE.ReplaceAllString(msg, "<n>")
}
