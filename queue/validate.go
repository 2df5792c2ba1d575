package queue

import (
	"fmt"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/payload"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Every string the queue stores must be one PostgreSQL stores as given:
// text without NUL bytes and in UTF-8, and JSON that jsonb takes (no
// \u0000 escape, no unpaired surrogate escape, numbers numeric can hold).
// Otherwise the database refuses the statement with an error of its own,
// or, for strings encoding/json replaces, the job is stored altered. The
// checks here refuse such input before any statement, naming the field.

// checkText refuses s, given as the option or field called name, if
// PostgreSQL would not store it as text.
func checkText(name, s string) error {
	if flaw := payload.TextFlaw(s); flaw != "" {
		return invalid("%s: %s", name, flaw)
	}
	return nil
}

// checkTexts checks pairs of names and values with checkText.
func checkTexts(namesAndValues ...string) error {
	for i := 0; i+1 < len(namesAndValues); i += 2 {
		if err := checkText(namesAndValues[i], namesAndValues[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// within refuses v, the what, outside [lo, hi].
func within[T int | time.Duration](what string, v, lo, hi T) error {
	if v < lo || v > hi {
		return invalid("%s %v not in [%s, %s]", what, v, short(lo), short(hi))
	}
	return nil
}

// short prints v, whole hours as 1h rather than 1h0m0s.
func short[T int | time.Duration](v T) string {
	if d, ok := any(v).(time.Duration); ok && d >= time.Hour && d%time.Hour == 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return fmt.Sprint(v)
}

// refuse returns an error wrapping ErrInvalidOption, saying what format
// says, if bad.
func refuse(bad bool, format string, args ...any) error {
	if bad {
		return invalid(format, args...)
	}
	return nil
}

// set sets *field to v unless err is set, and returns err.
func set[T any](field *T, v T, err error) error {
	if err == nil {
		*field = v
	}
	return err
}

// checkName refuses s, the what given to option, unless it is 1 to most
// bytes of text PostgreSQL stores.
func checkName(option, what, s string, most int) error {
	if s == "" || len(s) > most {
		return invalid("%s must have 1 to %d bytes", what, most)
	}
	return checkText(option, s)
}

// maxQueueName is the longest queue name, in bytes.
const maxQueueName = 128

// checkQueueName checks a queue name given to option.
func checkQueueName(option, name string) error {
	if name == "" || len(name) > maxQueueName {
		return invalid("%s: queue name %q must have 1 to %d bytes", option, name, maxQueueName)
	}
	return checkText(option, name)
}

// check refuses a filter whose strings PostgreSQL could not compare with
// a column.
func (f Filter) check() error {
	nv := []string{"Filter.Queue", f.Queue, "Filter.CorrelationID", f.CorrelationID,
		"Filter.RunID", f.RunID, "Filter.Period", f.Period, "Filter.Search", f.Search}
	for i, k := range f.Kinds {
		nv = append(nv, fmt.Sprintf("Filter.Kinds[%d]", i), k)
	}
	for i, s := range f.Statuses {
		nv = append(nv, fmt.Sprintf("Filter.Statuses[%d]", i), string(s))
	}
	return checkTexts(nv...)
}

// unpaged clears the fields of f that page through results, for the
// operations that act on every job f selects.
func (f *Filter) unpaged() { f.AfterID, f.BeforeID, f.Newest, f.Limit = 0, 0, false, 0 }

// checkEncoded refuses v, encoded by encoding/json as enc, if jsonb would
// refuse enc or if encoding/json replaced bytes of a string of v that are
// not UTF-8 (see payload.Check). The error wraps ErrInvalidPayload and names
// the part of v at fault, from root ("args", "auth").
func checkEncoded(root string, v any, enc []byte, plain bool) error {
	if what := payload.Check(root, v, enc, plain); what != "" {
		return fmt.Errorf("%w: %s", ErrInvalidPayload, what)
	}
	return nil
}

// checkRaw refuses a JSON payload given as such (EnqueueRaw) that jsonb
// would refuse.
func checkRaw(b []byte) error {
	if f, found, _ := payload.Scan(b); found {
		return fmt.Errorf("%w: payload: %s at offset %d", ErrInvalidPayload, f.What, f.At)
	}
	return nil
}

// pageLimit returns limit, or 100 for 0, refusing one outside [0, most].
func pageLimit(limit, most int) (int, error) {
	if limit < 0 || limit > most {
		return 0, invalid("limit %d not in [0, %d]", limit, most)
	}
	if limit == 0 {
		return 100, nil
	}
	return limit, nil
}

// failed returns err, if it is not nil, as the error of the operation op,
// marked ErrNotMigrated if it says so.
func failed(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("queue: %s: %w", op, notMigrated(err))
}

// notMigrated marks err as ErrNotMigrated, keeping it in the chain, when the
// database said that one of sheaf's tables or columns does not exist (see
// store.Unmigrated). It returns any other error, and nil, as it is.
func notMigrated(err error) error {
	if !store.Unmigrated(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNotMigrated, err)
}
