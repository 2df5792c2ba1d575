package gormbatch

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm/schema"

	"github.com/sheaf-dev/sheaf/batch"
)

// The COPY path encodes rows itself, with pgx's type map, rather than calling
// pgx.Conn.CopyFrom: CopyFrom reads the rows and encodes them on a goroutine
// of its own, where a panicking driver.Valuer or MarshalJSON of the user's
// model would crash the process instead of failing the batch. Here the rows
// are encoded on the worker's goroutine, where the coordinator recovers
// panics, and only finished bytes cross to pgconn's copy goroutine.

// copyFlushSize is how many encoded bytes are gathered before they are handed
// to the connection: about one CopyData message of pgconn's.
const copyFlushSize = 64 << 10

// errCopyEnded unblocks the encoder when the server ended the COPY early.
var errCopyEnded = errors.New("gormbatch: copy ended")

func (t *Table[T]) copy(ctx context.Context, b batch.Batch[T]) error {
	items := reflect.ValueOf(b.Items)
	fields, err := t.copyFields(ctx, items)
	if err != nil {
		return fmt.Errorf("gormbatch: copy into %s: %w", t.table, err)
	}
	conn, err := t.sqlDB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("gormbatch: copy into %s: %w", t.table, err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("connection is a %T: %w", dc, ErrNotPostgres)
		}
		txCtx, commit, done := commitContext(ctx)
		defer done(nil) // frees the context also when encoding panics
		return done(t.copyRows(txCtx, c.Conn(), fields, b, items, func() error {
			if !commit() {
				return context.Cause(ctx)
			}
			return nil
		}))
	})
	if err != nil {
		return fmt.Errorf("gormbatch: copy into %s: %w", t.table, err)
	}
	return nil
}

// copyFields returns the columns of this sub-batch: the fixed ones, and each
// database-defaulted one that every item sets. gorm's INSERT can mix values
// and DEFAULT row by row; COPY has one column list.
func (t *Table[T]) copyFields(ctx context.Context, items reflect.Value) ([]*schema.Field, error) {
	fields := t.fields
	for _, f := range t.dbDefaults {
		set := 0
		for i := range items.Len() {
			if _, zero := f.ValueOf(ctx, reflect.Indirect(items.Index(i))); !zero {
				set++
			}
		}
		switch set {
		case 0:
		case items.Len():
			fields = append(fields[:len(fields):len(fields)], f)
		default:
			return nil, fmt.Errorf("column %s has a database default and is set in %d of %d items; COPY needs all or none", f.DBName, set, items.Len())
		}
	}
	return fields, nil
}

// copyRows runs the transaction of one sub-batch on c: BEGIN, COPY, and
// COMMIT if beforeCommit allows it.
func (t *Table[T]) copyRows(ctx context.Context, c *pgx.Conn, fields []*schema.Field, b batch.Batch[T], items reflect.Value,
	beforeCommit func() error) (err error) {
	table := pgx.Identifier(strings.Split(t.table, ".")).Sanitize()
	cols := make([]string, len(fields))
	for i, f := range fields {
		cols[i] = pgx.Identifier{f.DBName}.Sanitize()
	}
	list := strings.Join(cols, ", ")
	sd, err := describe(ctx, c, "SELECT "+list+" FROM "+table)
	if err != nil {
		return err
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			// After a failed statement or a cancelled ctx the rollback may
			// fail too; pgx then closes the connection, which database/sql
			// discards, and the server rolls back.
			_ = tx.Rollback(ctx)
		}
	}()

	pr, pw := io.Pipe()
	type result struct {
		tag pgconn.CommandTag
		err error
	}
	done := make(chan result, 1)
	go func() {
		tag, err := c.PgConn().CopyFrom(ctx, pr, "COPY "+table+" ("+list+") FROM STDIN BINARY")
		pr.CloseWithError(errCopyEnded) // a writer the server no longer reads from must not block
		done <- result{tag, err}
	}()
	joined := false
	defer func() {
		if !joined { // a panic while encoding: abort the COPY, then let the panic go on
			pw.CloseWithError(errors.New("gormbatch: panic while encoding"))
			<-done
		}
	}()

	encErr := t.encode(ctx, pw, c.TypeMap(), sd, fields, b, items)
	if encErr != nil {
		pw.CloseWithError(encErr)
	} else {
		pw.Close()
	}
	res := <-done
	joined = true
	switch {
	case encErr != nil && !errors.Is(encErr, errCopyEnded):
		return encErr // the server only saw the COPY abort; our error says why
	case res.err != nil:
		return res.err
	}
	if err := beforeCommit(); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	committed = true
	return nil
}

// describe returns the column types of query, for the binary encoding; the
// statement is described, never executed. Like pgx's own CopyFrom, it keeps
// the description on the connection when pgx caches statements (its default
// mode), and asks every time in the other modes, which exist for poolers such
// as PgBouncer that do not keep prepared statements.
func describe(ctx context.Context, c *pgx.Conn, query string) (*pgconn.StatementDescription, error) {
	if c.Config().DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
		return c.Prepare(ctx, query, query)
	}
	return c.PgConn().Prepare(ctx, "", query, nil)
}

// encode writes the rows in PostgreSQL's binary COPY format.
func (t *Table[T]) encode(ctx context.Context, w io.Writer, m *pgtype.Map, sd *pgconn.StatementDescription,
	fields []*schema.Field, b batch.Batch[T], items reflect.Value) error {
	buf := make([]byte, 0, copyFlushSize+copyFlushSize/4)
	buf = append(buf, "PGCOPY\n\377\r\n\000"...)
	buf = binary.BigEndian.AppendUint32(buf, 0) // flags
	buf = binary.BigEndian.AppendUint32(buf, 0) // header extension length
	var (
		id    any = b.ID // boxed once, not once per row
		now       = t.db.NowFunc()
		plans     = make([]encodePlan, len(fields))
		err   error
	)
	for i := range items.Len() {
		item := reflect.Indirect(items.Index(i))
		if err := t.stamp(ctx, item, b, i); err != nil {
			return err
		}
		buf = binary.BigEndian.AppendUint16(buf, uint16(len(fields)))
		for j, f := range fields {
			v := id
			if j > 0 { // fields[0] is the batch ID
				if v, err = createValue(ctx, f, item, now); err != nil {
					return err
				}
			}
			if buf, err = plans[j].encode(m, buf, sd.Fields[j].DataTypeOID, v); err != nil {
				return fmt.Errorf("item %d of the batch, column %s: %w", b.Offset+int64(i), f.DBName, err)
			}
		}
		if len(buf) >= copyFlushSize {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	buf = binary.BigEndian.AppendUint16(buf, 0xFFFF) // trailer
	_, err = w.Write(buf)
	return err
}

// createValue is the value gorm's Create would insert for field f of item,
// and like Create it writes the default it chose back into the item.
func createValue(ctx context.Context, f *schema.Field, item reflect.Value, now time.Time) (any, error) {
	if direct(f) {
		// f.ValueOf but for its zero test, which only defaults need: the
		// hot path of COPY.
		return item.FieldByIndex(f.StructField.Index).Interface(), nil
	}
	v, zero := f.ValueOf(ctx, item)
	if !zero {
		return v, nil
	}
	switch {
	case f.DefaultValueInterface != nil:
		return f.DefaultValueInterface, f.Set(ctx, item, f.DefaultValueInterface)
	case f.AutoCreateTime > 0 || f.AutoUpdateTime > 0:
		if err := f.Set(ctx, item, now); err != nil { // converts to the field's unit
			return nil, err
		}
		v, _ = f.ValueOf(ctx, item)
	}
	return v, nil
}

// encodePlan remembers pgx's encode plan for the type a column's values had
// last, which is their type in every row but for fields of interface type.
// That is what Map.Encode looks up in two maps for each value; keeping it
// saves a fifth of the encoding time.
type encodePlan struct {
	typ  reflect.Type
	plan pgtype.EncodePlan
}

// encode appends v as one binary COPY field, as encodeValue does.
func (p *encodePlan) encode(m *pgtype.Map, buf []byte, oid uint32, v any) ([]byte, error) {
	typ := reflect.TypeOf(v)
	if typ == nil || nilable(typ.Kind()) {
		return encodeValue(m, buf, oid, v) // Map.Encode's handling of nil values applies
	}
	if typ != p.typ {
		p.typ, p.plan = typ, m.PlanEncode(oid, pgtype.BinaryFormatCode, v)
	}
	if p.plan == nil {
		return encodeValue(m, buf, oid, v) // for its error
	}
	start := len(buf)
	buf = binary.BigEndian.AppendUint32(buf, 0xFFFFFFFF)
	out, err := p.plan.Encode(v, buf)
	if err != nil {
		return encodeValue(m, buf[:start], oid, v) // the text fallback, or the error as Map.Encode words it
	}
	if out == nil {
		return buf, nil
	}
	binary.BigEndian.PutUint32(out[start:], uint32(len(out)-start-4))
	return out, nil
}

func nilable(k reflect.Kind) bool {
	switch k {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return true
	}
	return false
}

// direct reports whether f's value is the struct field itself, as it is for
// most fields: no serializer, no default to apply when it is zero, and no
// embedded pointer on the way to it.
func direct(f *schema.Field) bool {
	if f.Serializer != nil || f.DefaultValueInterface != nil || f.AutoCreateTime > 0 || f.AutoUpdateTime > 0 {
		return false
	}
	for _, i := range f.StructField.Index {
		if i < 0 { // gorm's mark of an embedded pointer
			return false
		}
	}
	return true
}

// encodeValue appends v as one binary COPY field: its length, then its bytes
// (length -1 for NULL). Like pgx's CopyFrom, it falls back to parsing the text
// form of a value that has no binary encoding for the column's type, such as a
// string for a uuid column.
func encodeValue(m *pgtype.Map, buf []byte, oid uint32, v any) ([]byte, error) {
	start := len(buf)
	buf = binary.BigEndian.AppendUint32(buf, 0xFFFFFFFF)
	out, err := m.Encode(oid, pgtype.BinaryFormatCode, v, buf)
	if err != nil {
		var err2 error
		if out, err2 = encodeViaText(m, buf, oid, v); err2 != nil {
			return nil, err
		}
	}
	if out == nil { // NULL: keep the -1
		return buf, nil
	}
	binary.BigEndian.PutUint32(out[start:], uint32(len(out)-start-4))
	return out, nil
}

func encodeViaText(m *pgtype.Map, buf []byte, oid uint32, v any) ([]byte, error) {
	s, ok := v.(string)
	if !ok {
		text, err := m.Encode(oid, pgtype.TextFormatCode, v, nil)
		if err != nil {
			return nil, err
		}
		s = string(text)
	}
	var parsed any
	if err := m.Scan(oid, pgtype.TextFormatCode, []byte(s), &parsed); err != nil {
		return nil, err
	}
	return m.Encode(oid, pgtype.BinaryFormatCode, parsed, buf)
}
