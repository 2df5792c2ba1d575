// Package check refuses bad input to package queue before any statement
// runs: option values out of range, and text and JSON that PostgreSQL would
// not store as given (text without NUL bytes and in UTF-8; JSON that jsonb
// takes: no \u0000 escape, no unpaired surrogate escape, numbers numeric
// can hold). Otherwise the database refuses the statement with an error of
// its own, or, for strings encoding/json replaces, the job is stored
// altered. Every error names the field or option at fault.
//
// It holds package queue's sentinel errors for bad input, which queue
// exports under the same names, so that its internal packages can wrap
// them too.
package check

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/payload"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// The errors that queue exports as its own; see their documentation there.
var (
	ErrInvalidOption  = errors.New("queue: invalid option")
	ErrInvalidPayload = errors.New("queue: invalid payload")
	ErrNotMigrated    = errors.New("queue: " + notMigratedText)
)

// notMigratedText is what ErrNotMigrated says after its "queue: ".
const notMigratedText = "schema not migrated; call Client.Migrate"

// Invalid returns an error wrapping ErrInvalidOption that says what format
// says.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...)
}

// Refuse returns Invalid(format, args...) if bad, and nil otherwise.
func Refuse(bad bool, format string, args ...any) error {
	if bad {
		return Invalid(format, args...)
	}
	return nil
}

// Set sets *field to v unless err is set, and returns err: an option's
// setter in one line.
func Set[T any](field *T, v T, err error) error {
	if err == nil {
		*field = v
	}
	return err
}

// Each applies opts with apply, refusing a nil option (an interface
// holding nothing, which the compiler lets through); what names their type.
func Each[O any](what string, opts []O, apply func(O) error) error {
	for _, opt := range opts {
		if any(opt) == nil {
			return Invalid("nil %s", what)
		}
		if err := apply(opt); err != nil {
			return err
		}
	}
	return nil
}

// Text refuses s, given as the option or field called name, if PostgreSQL
// would not store it as text.
func Text(name, s string) error {
	if flaw := payload.TextFlaw(s); flaw != "" {
		return Invalid("%s: %s", name, flaw)
	}
	return nil
}

// Texts checks pairs of names and values with Text.
func Texts(namesAndValues ...string) error {
	for i := 0; i+1 < len(namesAndValues); i += 2 {
		if err := Text(namesAndValues[i], namesAndValues[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// Within refuses v, the what, outside [lo, hi].
func Within[T int | time.Duration](what string, v, lo, hi T) error {
	if v < lo || v > hi { // not Refuse: its arguments would be built for every good value
		return Invalid("%s %v not in [%s, %s]", what, v, short(lo), short(hi))
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

// Name refuses s, the what given to option, unless it is 1 to most bytes of
// text PostgreSQL stores.
func Name(option, what, s string, most int) error {
	if s == "" || len(s) > most {
		return Invalid("%s must have 1 to %d bytes", what, most)
	}
	return Text(option, s)
}

// MaxQueueName is the longest queue name, in bytes.
const MaxQueueName = 128

// QueueName checks a queue name given to option.
func QueueName(option, name string) error {
	if name == "" || len(name) > MaxQueueName {
		return Invalid("%s: queue name %q must have 1 to %d bytes", option, name, MaxQueueName)
	}
	return Text(option, name)
}

// Encoded refuses v, encoded by encoding/json as enc, if jsonb would refuse
// enc or if encoding/json replaced bytes of a string of v that are not
// UTF-8 (see payload.Check). The error wraps ErrInvalidPayload and names
// the part of v at fault, from root ("args", "auth").
func Encoded(root string, v any, enc []byte, plain bool) error {
	if what := payload.Check(root, v, enc, plain); what != "" {
		return fmt.Errorf("%w: %s", ErrInvalidPayload, what)
	}
	return nil
}

// Raw refuses a JSON payload given as such (EnqueueRaw) that jsonb would
// refuse.
func Raw(b []byte) error {
	if f, found, _ := payload.Scan(b); found {
		return fmt.Errorf("%w: payload: %s at offset %d", ErrInvalidPayload, f.What, f.At)
	}
	return nil
}

// PageLimit returns limit, or 100 for 0, refusing one outside [0, most].
func PageLimit(limit, most int) (int, error) {
	if limit < 0 || limit > most {
		return 0, Invalid("limit %d not in [0, %d]", limit, most)
	}
	if limit == 0 {
		return 100, nil
	}
	return limit, nil
}

// Failed returns err, if it is not nil, as the error of the operation op,
// marked ErrNotMigrated if it says so. When ctx has ended, the error also
// matches ctx's: a context that ends while a statement is being written
// comes back from the driver as the socket's timeout, and callers tell a
// cancelled call from a failed one by errors.Is(err, context.Canceled).
func Failed(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		err = fmt.Errorf("%w: %w", ctxErr, err)
	}
	return fmt.Errorf("queue: %s: %w", op, NotMigrated(err))
}

// NotMigrated marks err as ErrNotMigrated, keeping it in the chain, when
// the database said that one of sheaf's tables or columns does not exist
// (see store.Unmigrated). It returns any other error, and nil, as it is.
func NotMigrated(err error) error {
	if !store.Unmigrated(err) {
		return err
	}
	return notMigrated{err}
}

// notMigrated is err marked ErrNotMigrated. It says so without
// ErrNotMigrated's "queue: ", which the operation's error around it says
// already ("queue: list: schema not migrated; ...").
type notMigrated struct{ err error }

func (e notMigrated) Error() string { return notMigratedText + ": " + e.err.Error() }

func (e notMigrated) Unwrap() []error { return []error{ErrNotMigrated, e.err} }
