package queue

import (
	"errors"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

var (
	// ErrUnknownKind is returned when a job names a kind that is not
	// registered.
	ErrUnknownKind = errors.New("queue: unknown job kind")
	// ErrInvalidPayload is returned when a payload cannot be encoded, does
	// not decode into its kind's type, or holds text PostgreSQL would not
	// store as given (a NUL, bytes that are not UTF-8); auth claims with
	// such text too.
	ErrInvalidPayload = check.ErrInvalidPayload
	// ErrInvalidOption is wrapped by errors about options and arguments.
	ErrInvalidOption = check.ErrInvalidOption
	// ErrNotFound is returned when no job has the given ID.
	ErrNotFound = errors.New("queue: job not found")
	// ErrWrongStatus is wrapped when a job is not in a status the operation
	// accepts, such as cancelling a completed job.
	ErrWrongStatus = errors.New("queue: job is not in a status that allows this")
	// ErrSchemaTooNew is returned by Migrate when the database was migrated
	// by a newer sheaf.
	ErrSchemaTooNew = errors.New("queue: schema is newer than this sheaf")
	// ErrPartialSchema is wrapped by Migrate's error when the queue's
	// tables are not those of the schema version recorded: some were
	// dropped by hand, or the version table was. The error names the
	// tables found and those missing; restore what was dropped, or drop
	// the tables it names and call Migrate again.
	ErrPartialSchema = store.ErrPartialSchema
	// ErrNotMigrated is wrapped by errors from a database whose schema is
	// missing or older than this sheaf: call Client.Migrate.
	ErrNotMigrated = check.ErrNotMigrated
	// ErrStarted is returned by Runner.Start when called twice or after Stop.
	ErrStarted = errors.New("queue: runner already started")
	// ErrCancelled is the cause of a job context cancelled because the job
	// was cancelled (Client.Cancel).
	ErrCancelled = errors.New("queue: job cancelled")
	// ErrLeaseLost is the cause of a job context cancelled because the job
	// no longer belongs to this runner: its lease expired and it was rescued.
	ErrLeaseLost = errors.New("queue: job lease lost")
	// ErrStopping is the cause of a job context cancelled because Runner.Stop
	// ran out of time (or Start's context ended): the job goes back to the
	// queue at once, and whatever the handler returns is dropped.
	ErrStopping = errors.New("queue: runner stopping")
	// ErrTimeout is the cause of a job context cancelled by the kind's Timeout.
	ErrTimeout = errors.New("queue: job timed out")
)

// PermanentError marks a handler's error as not worth retrying: the job
// fails at once, whatever attempts it has left. Build one with Permanent.
type PermanentError struct{ Err error }

// Error returns the wrapped error's message, marked permanent.
func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err so that the job fails without further attempts. It
// returns nil for a nil err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// IsPermanent reports whether err, or an error it wraps, is a PermanentError.
func IsPermanent(err error) bool {
	var pe *PermanentError
	return errors.As(err, &pe)
}
