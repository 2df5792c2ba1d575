package gormbatch

import (
	"errors"
	"fmt"
	"strings"
)

// DefaultBatchIDColumn is the column that holds the batch ID unless
// [WithBatchIDColumn] names another.
const DefaultBatchIDColumn = "batch_id"

// An Option configures a [Table]. Options are built by the With functions of
// this package.
type Option interface {
	apply(*options) error
}

type options struct {
	batchIDColumn string
	table         string // "": the model's table
	copy          bool
	deleteChunk   int // 0: one DELETE
}

type optionFunc func(*options) error

func (f optionFunc) apply(o *options) error { return f(o) }

// errInvalidOption is wrapped by New's errors about options; callers do not
// branch on it, so it is not exported.
var errInvalidOption = errors.New("gormbatch: invalid option")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errInvalidOption}, args...)...)
}

// WithCopy makes Process write each sub-batch with PostgreSQL's COPY (binary
// format, through pgx) instead of gorm's INSERT: two to three times faster in
// our benchmarks, at the price of gorm's per-row features. COPY writes the
// model's columns and nothing else: gorm hooks (BeforeCreate and the like) do
// not run, associations are not saved, and generated keys are not read back
// into the items. Defaults are honoured as gorm honours them (see
// [Table.Process]).
//
// It needs gorm's postgres dialector on a pgx (v5) connection, which is what
// gorm.io/driver/postgres opens; on any other database New returns an error
// wrapping [ErrNotPostgres]. Default off: sub-batches are written with gorm.
func WithCopy() Option {
	return optionFunc(func(o *options) error {
		o.copy = true
		return nil
	})
}

// WithBatchIDColumn names the column that holds the batch ID: Process writes
// each item's batch ID there and Cleanup deletes by it. The model must have a
// field of a string type for it; the field's Go name is accepted too. Default
// [DefaultBatchIDColumn]. Index the column: Cleanup's cost then depends on the
// size of the batch, not of the table.
func WithBatchIDColumn(name string) Option {
	return optionFunc(func(o *options) error {
		if strings.TrimSpace(name) == "" {
			return invalid("empty batch-ID column")
		}
		o.batchIDColumn = name
		return nil
	})
}

// WithTable writes to and deletes from the named table instead of the model's
// (the one gorm derives from the type or its TableName method), for tables
// that share a model, such as one table per month. A schema-qualified name
// ("sales.orders") is accepted. Default: the model's table.
func WithTable(name string) Option {
	return optionFunc(func(o *options) error {
		if strings.TrimSpace(name) == "" {
			return invalid("empty table name")
		}
		o.table = name
		return nil
	})
}

// WithDeleteChunk makes Cleanup delete a batch's rows n at a time, each chunk
// in a transaction of its own, until none is left. A large batch then never
// holds one long transaction, and a cleanup stopped by its deadline (see
// batch.WithCleanupTimeout) keeps what it deleted: calling Cleanup again
// finishes the job. PostgreSQL only (it deletes by ctid); elsewhere New returns
// an error wrapping [ErrNotPostgres]. Default 0: one DELETE statement, one
// transaction, for the whole batch.
func WithDeleteChunk(n int) Option {
	return optionFunc(func(o *options) error {
		if n < 0 {
			return invalid("delete chunk %d is negative", n)
		}
		o.deleteChunk = n
		return nil
	})
}
