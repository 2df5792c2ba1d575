package gormbatch

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/cleanup"
	"github.com/sheaf-dev/sheaf/internal/pgerr"
)

var (
	// ErrNotPostgres is wrapped by the errors of New when WithCopy or
	// WithDeleteChunk is used on a database other than PostgreSQL through
	// gorm's postgres dialector and pgx, and by Process should a connection
	// of another driver turn up anyway.
	ErrNotPostgres = errors.New("gormbatch: not a PostgreSQL database on pgx")
	// ErrBatchIDMismatch is wrapped by Process's error when an item's
	// batch-ID field holds a batch ID other than the one it was sent with.
	ErrBatchIDMismatch = errors.New("gormbatch: item carries another batch ID")
	// ErrNotModel is wrapped by New's error when T is not a model: not a
	// struct or a pointer to one, or a struct that gorm cannot parse.
	ErrNotModel = errors.New("gormbatch: not a model gorm can map to a table")
)

// maxBindParams is the most parameters PostgreSQL (and MySQL) accept in one
// statement; a gorm INSERT binds one per column and row.
const maxBindParams = 65535

// Table persists the sub-batches of a gorm model T into the model's table and
// removes the rows of failed batches. It is both the processor and the cleanup
// strategy of a coordinator, so both agree on the table and the batch-ID
// column:
//
//	orders, err := gormbatch.New[Order](db)
//	...
//	c, err := batch.NewCoordinator[Order](orders, batch.WithCleanup(orders))
//
// T is the model: a struct, or a pointer to one, that gorm can parse. A Table
// is safe for concurrent use; it keeps no reference to the items it writes.
type Table[T any] struct {
	db      *gorm.DB // a session without statement state
	sqlDB   *sql.DB  // set with WithCopy
	table   string   // as given to gorm: maybe schema-qualified
	idField *schema.Field
	o       options

	rowsPerInsert int // gorm path: rows per INSERT within a sub-batch
	// valuers are the fields whose values come from user code: a
	// driver.Valuer or a gorm serializer (see callValuers).
	valuers []*schema.Field

	// COPY path: fields is what every row writes, the batch-ID column
	// first; dbDefaults are filled by the database unless the items set them.
	fields     []*schema.Field
	dbDefaults []*schema.Field
}

var (
	_ batch.Processor[struct{}] = (*Table[struct{}])(nil)
	_ cleanup.Strategy          = (*Table[struct{}])(nil)
)

// New parses the model T with db's naming strategy and returns a Table that
// writes through db. db must not be inside a transaction: every sub-batch
// gets a transaction of its own. Size db's pool for the coordinator: at
// least as many open and idle connections as workers (database/sql keeps
// only two idle connections by default and would reconnect for nearly every
// sub-batch).
//
// New returns an error if an option is invalid, wrapping [ErrNotModel] if T
// is not a model gorm can parse, if the model lacks a string field for the
// batch-ID column, or, wrapping [ErrNotPostgres], if a PostgreSQL-only option
// is used elsewhere.
func New[T any](db *gorm.DB, opts ...Option) (*Table[T], error) {
	if db == nil {
		return nil, invalid("nil *gorm.DB")
	}
	if _, inTx := db.Statement.ConnPool.(gorm.TxCommitter); inTx {
		return nil, invalid("db is inside a transaction; each sub-batch needs its own")
	}
	o := options{batchIDColumn: DefaultBatchIDColumn}
	for _, opt := range opts {
		if opt == nil {
			return nil, invalid("nil Option")
		}
		if err := opt.apply(&o); err != nil {
			return nil, err
		}
	}
	t := &Table[T]{db: db.Session(&gorm.Session{NewDB: true}), o: o}
	if err := t.parse(); err != nil {
		return nil, err
	}
	if err := t.checkPostgres(); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Table[T]) parse() error {
	model := reflect.TypeFor[T]()
	if s := model; s.Kind() != reflect.Struct && (s.Kind() != reflect.Pointer || s.Elem().Kind() != reflect.Struct) {
		// gorm would say "unsupported data type" and print new(T), an address.
		return fmt.Errorf("%w: New[%v]: %v is not a struct or a pointer to one", ErrNotModel, model, model)
	}
	stmt := &gorm.Statement{DB: t.db}
	if err := stmt.Parse(new(T)); err != nil {
		return fmt.Errorf("%w: New[%v]: %w", ErrNotModel, model, err)
	}
	s := stmt.Schema
	t.table = s.Table
	if t.o.table != "" {
		t.table = t.o.table
	}
	f := s.LookUpField(t.o.batchIDColumn)
	switch {
	case f == nil || f.DBName == "":
		return fmt.Errorf("gormbatch: model %v has no field for the batch-ID column %q (see WithBatchIDColumn)", model, t.o.batchIDColumn)
	case f.FieldType.Kind() != reflect.String:
		return fmt.Errorf("gormbatch: the batch-ID field %s of model %v is a %v; it must be a string", f.Name, model, f.FieldType)
	case !f.Creatable:
		return fmt.Errorf("gormbatch: the batch-ID field %s of model %v is read-only for gorm", f.Name, model)
	}
	t.idField = f
	t.rowsPerInsert = max(1, maxBindParams/len(s.DBNames))

	// The COPY columns are those gorm's INSERT writes (see ConvertToCreateValues
	// in gorm's callbacks): creatable fields, with the ones the database
	// fills by default set apart.
	t.fields = []*schema.Field{f}
	for _, name := range s.DBNames {
		field := s.FieldsByDBName[name]
		if field.Creatable && (field.Serializer != nil || field.FieldType.Implements(valuerType) ||
			reflect.PointerTo(field.FieldType).Implements(valuerType)) {
			t.valuers = append(t.valuers, field)
		}
		switch {
		case field == f || !field.Creatable:
		case field.HasDefaultValue && field.DefaultValueInterface == nil:
			t.dbDefaults = append(t.dbDefaults, field)
		default:
			t.fields = append(t.fields, field)
		}
	}
	return nil
}

func (t *Table[T]) checkPostgres() error {
	if !t.o.copy && t.o.deleteChunk == 0 {
		return nil
	}
	if name := t.db.Dialector.Name(); name != "postgres" {
		return fmt.Errorf("gormbatch: WithCopy and WithDeleteChunk need PostgreSQL, db is %s: %w", name, ErrNotPostgres)
	}
	if !t.o.copy {
		return nil
	}
	sqlDB, err := t.db.DB()
	if err != nil {
		return fmt.Errorf("gormbatch: %w", err)
	}
	if _, ok := sqlDB.Driver().(*stdlib.Driver); !ok {
		return fmt.Errorf("gormbatch: WithCopy needs the pgx v5 driver, db uses %T: %w", sqlDB.Driver(), ErrNotPostgres)
	}
	t.sqlDB = sqlDB
	return nil
}

// Process writes the sub-batch b in one transaction: it commits every item or,
// on any error, none. By default it writes with gorm's Create, so the model's
// hooks run, associations are saved and generated keys are read back into the
// items, as gorm does; a sub-batch too large for one INSERT's parameters is
// written with several INSERTs in the same transaction. With [WithCopy] it
// writes with COPY instead.
//
// The batch-ID field of an item that leaves it empty is set to b.ID; an item
// whose field holds another batch ID fails the sub-batch with
// [ErrBatchIDMismatch], because Cleanup deletes by that column and would miss
// the row.
//
// Fields left at their zero value get the model's defaults as with gorm's
// Create: a literal default (`gorm:"default:7"`), the current time for
// autoCreateTime and autoUpdateTime fields, and the database's default for
// auto-increment keys and expression defaults. COPY sends one column list per
// sub-batch, so it refuses a sub-batch in which some items set a
// database-defaulted field and others leave it zero.
//
// When ctx ends, Process cancels its statement and rolls back, unless it has
// sent COMMIT already: then it waits for the answer (up to 30 seconds), so
// that it never reports a failure for a sub-batch that was committed.
//
// Errors name the table and wrap the database's: errors.As with a
// *pgconn.PgError gives the SQLSTATE. The coordinator adds the batch ID and
// sequence number (see batch.ProcessError).
func (t *Table[T]) Process(ctx context.Context, b batch.Batch[T]) error {
	if len(b.Items) == 0 {
		return nil
	}
	if t.o.copy {
		return t.copy(ctx, b)
	}
	items := reflect.ValueOf(b.Items)
	for i := range items.Len() {
		item := reflect.Indirect(items.Index(i))
		if err := t.stamp(ctx, item, b, i); err != nil {
			return err
		}
		if err := t.callValuers(ctx, item, b, i); err != nil {
			return err
		}
	}
	txCtx, commit, done := commitContext(ctx)
	defer done(nil) // frees the context also when the write panics
	err := done(t.db.WithContext(txCtx).Transaction(func(tx *gorm.DB) error {
		for chunk := range slices.Chunk(b.Items, t.rowsPerInsert) {
			if err := tx.Table(t.table).Create(&chunk).Error; err != nil {
				return err
			}
		}
		if !commit() {
			return context.Cause(ctx) // stopped: roll back
		}
		return nil // gorm commits
	}))
	if err != nil {
		return fmt.Errorf("gormbatch: insert into %s: %w", t.table, err)
	}
	return nil
}

// commitTimeout bounds a sub-batch's COMMIT, which its context does not
// cancel (see commitContext).
const commitTimeout = 30 * time.Second

var errCommitTimeout = errors.New("gormbatch: COMMIT took longer than 30s")

// commitContext returns the context for a sub-batch's transaction: ctx until
// the processor calls commit, right before it sends COMMIT; from then on
// only commitTimeout ends it. Cutting a COMMIT short would leave its fate
// unknown: the processor would report a failure, the coordinator would clean
// up, and a COMMIT that the server completes after the cleanup's DELETE has
// looked would leave the sub-batch's rows behind. commit reports false if
// ctx has already ended; the processor then rolls back. done frees the
// context and returns the transaction's error, naming the timeout if that is
// what ended it (the driver only says "context canceled"); calling it again
// does no harm.
func commitContext(ctx context.Context) (txCtx context.Context, commit func() bool, done func(error) error) {
	txCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	follow := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	var timer *time.Timer
	commit = func() bool {
		if !follow() {
			return false
		}
		timer = time.AfterFunc(commitTimeout, func() { cancel(errCommitTimeout) })
		return true
	}
	done = func(err error) error {
		follow()
		if timer != nil {
			timer.Stop()
		}
		if err != nil && context.Cause(txCtx) == errCommitTimeout {
			err = fmt.Errorf("%w: %w", errCommitTimeout, err)
		}
		cancel(nil)
		return err
	}
	return txCtx, commit, done
}

// stamp fills item i's empty batch-ID field with b.ID and refuses another
// batch ID.
func (t *Table[T]) stamp(ctx context.Context, item reflect.Value, b batch.Batch[T], i int) error {
	f := t.idField.ReflectValueOf(ctx, item)
	switch id := f.String(); id {
	case b.ID:
		return nil
	case "":
		f.SetString(b.ID)
		return nil
	default:
		return fmt.Errorf("gormbatch: %s: item %d of the batch has batch ID %q, not %q: %w",
			t.table, b.Offset+int64(i), id, b.ID, ErrBatchIDMismatch)
	}
}

var valuerType = reflect.TypeFor[driver.Valuer]()

// callValuers calls the Valuers and serializers of item i's fields, so that a
// panic in one happens here rather than inside database/sql: a panic there
// leaves the transaction's lock held, and the rollback that gorm's
// Transaction then attempts waits for it forever. The driver calls them again
// when it encodes the INSERT; it skips a nil pointer whose element type has
// the Value method, as database/sql does, because calling it would panic.
func (t *Table[T]) callValuers(ctx context.Context, item reflect.Value, b batch.Batch[T], i int) error {
	for _, f := range t.valuers {
		v, _ := f.ValueOf(ctx, item)
		valuer, ok := v.(driver.Valuer)
		if !ok {
			continue
		}
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() && rv.Type().Elem().Implements(valuerType) {
			continue
		}
		if _, err := valuer.Value(); err != nil {
			return fmt.Errorf("gormbatch: insert into %s: item %d of the batch, column %s: %w", t.table, b.Offset+int64(i), f.DBName, err)
		}
	}
	return nil
}

// Cleanup deletes every row of batchID from the table, whichever sub-batch
// wrote it; failedSeq does not matter. It is idempotent: a second call finds
// nothing to delete and returns nil. The delete runs in its own transaction,
// or with [WithDeleteChunk] in one transaction per chunk. A delete that fails
// because the server was unavailable (a broken connection, a server restarting
// or full, a lost deadlock) is tried again, with pauses that grow to a second,
// until ctx ends: a batch that failed because its server went away is cleaned
// up once it is back. Give ctx a deadline, as the coordinator does: while the
// server stays away, Cleanup waits for it as long as ctx lets it. It honours
// ctx (the coordinator bounds it with batch.WithCleanupTimeout): when ctx ends
// the statement is cancelled and Cleanup returns an error, after which the
// batch's rows are all still there (one DELETE) or partly deleted (chunks);
// call it again to finish. Rows are deleted, never soft-deleted, whatever the
// model.
func (t *Table[T]) Cleanup(ctx context.Context, batchID string, failedSeq int) error {
	db := t.db.WithContext(ctx)
	table, column := clause.Table{Name: t.table}, clause.Column{Name: t.idField.DBName}
	if t.o.deleteChunk == 0 {
		if _, err := retried(ctx, func() (int64, error) {
			return 0, db.Exec("DELETE FROM ? WHERE ? = ?", table, column, batchID).Error
		}); err != nil {
			return fmt.Errorf("gormbatch: delete batch %q from %s: %w", batchID, t.table, err)
		}
		return nil
	}
	// The outer test on the batch ID keeps the delete to the batch even
	// where a ctid is not unique (across the partitions of a partitioned
	// table).
	for {
		n, err := retried(ctx, func() (int64, error) {
			res := db.Exec("DELETE FROM ? WHERE ? = ? AND ctid = ANY(ARRAY(SELECT ctid FROM ? WHERE ? = ? LIMIT ?))",
				table, column, batchID, table, column, batchID, t.o.deleteChunk)
			return res.RowsAffected, res.Error
		})
		if err != nil {
			return fmt.Errorf("gormbatch: delete batch %q from %s: %w", batchID, t.table, err)
		}
		if n < int64(t.o.deleteChunk) {
			return nil
		}
	}
}

// retried runs a delete, which may run again as it likes, until it
// succeeds, fails other than because the server was unavailable, or ctx
// ends; then the error wraps ctx's as well.
func retried(ctx context.Context, del func() (int64, error)) (int64, error) {
	var pause time.Duration
	for {
		n, err := del()
		if err == nil || !pgerr.Unavailable(err) {
			return n, err
		}
		pause = min(max(2*pause, 20*time.Millisecond), time.Second)
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return n, fmt.Errorf("%w (gave up: %w)", err, context.Cause(ctx))
		}
	}
}

// MarkComplete does nothing: a completed batch's rows are already committed.
func (t *Table[T]) MarkComplete(context.Context, string) error { return nil }
