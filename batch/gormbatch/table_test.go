package gormbatch_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"
	"gorm.io/gorm/schema"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/batch/gormbatch"
)

func TestNewRejects(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	type readOnlyID struct {
		BatchID string `gorm:"->"`
	}
	tx := e.Gorm.Begin()
	t.Cleanup(func() { tx.Rollback() })

	for _, tc := range []struct {
		name string
		new  func() error
		want string
	}{
		{"nil db", func() error { _, err := gormbatch.New[Order](nil); return err }, "nil *gorm.DB"},
		{"nil option", func() error { _, err := gormbatch.New[Order](e.Gorm, nil); return err }, "nil Option"},
		{"empty column", func() error { _, err := gormbatch.New[Order](e.Gorm, gormbatch.WithBatchIDColumn(" ")); return err }, "empty batch-ID column"},
		{"empty table", func() error { _, err := gormbatch.New[Order](e.Gorm, gormbatch.WithTable("")); return err }, "empty table name"},
		{"negative chunk", func() error { _, err := gormbatch.New[Order](e.Gorm, gormbatch.WithDeleteChunk(-1)); return err }, "delete chunk -1 is negative"},
		{"no such column", func() error {
			_, err := gormbatch.New[Order](e.Gorm, gormbatch.WithBatchIDColumn("run_id"))
			return err
		},
			`model gormbatch_test.Order has no field for the batch-ID column "run_id"`},
		{"not a string", func() error { _, err := gormbatch.New[Order](e.Gorm, gormbatch.WithBatchIDColumn("line")); return err },
			"the batch-ID field Line of model gormbatch_test.Order is a int; it must be a string"},
		{"read-only", func() error { _, err := gormbatch.New[readOnlyID](e.Gorm); return err }, "is read-only for gorm"},
		{"in a transaction", func() error { _, err := gormbatch.New[Order](tx); return err }, "db is inside a transaction"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.new()
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "gormbatch: ")
		})
	}
}

// A type that is not a model is named in the error, in the library's words,
// where gorm would print an address.
func TestNewRefusesATypeThatIsNotAModel(t *testing.T) {
	t.Parallel()
	db, err := gorm.Open(otherDialector{}, &gorm.Config{Logger: logger.Discard})
	require.NoError(t, err)
	type badRelation struct {
		BatchID string
		Owner   struct{ Name string } `gorm:"foreignKey:Nowhere"`
	}
	for _, tc := range []struct {
		name string
		new  func() error
		want string
	}{
		{"int", func() error { _, err := gormbatch.New[int](db); return err },
			"gormbatch: not a model gorm can map to a table: New[int]: int is not a struct or a pointer to one"},
		{"pointer to int", func() error { _, err := gormbatch.New[*int](db); return err },
			"gormbatch: not a model gorm can map to a table: New[*int]: *int is not a struct or a pointer to one"},
		{"slice of models", func() error { _, err := gormbatch.New[[]Order](db); return err },
			"New[[]gormbatch_test.Order]: []gormbatch_test.Order is not a struct or a pointer to one"},
		{"pointer to a pointer", func() error { _, err := gormbatch.New[**Order](db); return err },
			"New[**gormbatch_test.Order]: **gormbatch_test.Order is not a struct or a pointer to one"},
		{"a struct gorm cannot parse", func() error { _, err := gormbatch.New[badRelation](db); return err },
			"gormbatch: not a model gorm can map to a table: New[gormbatch_test.badRelation]: invalid field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.new()
			require.ErrorIs(t, err, gormbatch.ErrNotModel)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "0x", "no address")
		})
	}
}

// otherDialector stands for a database that is not PostgreSQL. It opens
// nothing.
type otherDialector struct{}

func (otherDialector) Name() string                    { return "sqlite" }
func (otherDialector) Initialize(*gorm.DB) error       { return nil }
func (otherDialector) Migrator(*gorm.DB) gorm.Migrator { return nil }
func (otherDialector) DataTypeOf(*schema.Field) string { return "" }
func (otherDialector) DefaultValueOf(*schema.Field) clause.Expression {
	return clause.Expr{SQL: "DEFAULT"}
}
func (otherDialector) BindVarTo(w clause.Writer, _ *gorm.Statement, _ any) { _ = w.WriteByte('?') }
func (otherDialector) QuoteTo(w clause.Writer, s string)                   { _, _ = w.WriteString(s) }
func (otherDialector) Explain(sql string, _ ...any) string                 { return sql }

// otherDriver is a database/sql driver that is not pgx; it never connects.
type otherDriver struct{}

func (otherDriver) Open(string) (driver.Conn, error) { return nil, errors.New("not connecting") }
func (otherDriver) Connect(context.Context) (driver.Conn, error) {
	return nil, errors.New("not connecting")
}
func (otherDriver) Driver() driver.Driver { return otherDriver{} }

func TestPostgresOnlyOptionsElsewhere(t *testing.T) {
	t.Parallel()
	other, err := gorm.Open(otherDialector{}, &gorm.Config{Logger: logger.Discard})
	require.NoError(t, err)
	for _, opt := range []gormbatch.Option{gormbatch.WithCopy(), gormbatch.WithDeleteChunk(100)} {
		_, err = gormbatch.New[Order](other, opt)
		require.ErrorIs(t, err, gormbatch.ErrNotPostgres)
		require.ErrorContains(t, err, "db is sqlite")
	}
	_, err = gormbatch.New[Order](other)
	require.NoError(t, err, "the gorm path is not PostgreSQL-specific")

	// gorm's postgres dialector over a driver that is not pgx: no COPY.
	sqlDB := sql.OpenDB(otherDriver{})
	t.Cleanup(func() { sqlDB.Close() })
	pgOther, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}),
		&gorm.Config{Logger: logger.Discard, DisableAutomaticPing: true})
	require.NoError(t, err)
	_, err = gormbatch.New[Order](pgOther, gormbatch.WithCopy())
	require.ErrorIs(t, err, gormbatch.ErrNotPostgres)
	require.ErrorContains(t, err, "needs the pgx v5 driver")
	_, err = gormbatch.New[Order](pgOther, gormbatch.WithDeleteChunk(100))
	require.NoError(t, err, "chunked deletes are plain SQL")
}

// migrated creates T's table with gorm's AutoMigrate and returns a Table of
// T with default options.
func migrated[T any](e *env) *gormbatch.Table[T] {
	e.t.Helper()
	require.NoError(e.t, e.Gorm.AutoMigrate(new(T)))
	tbl, err := gormbatch.New[T](e.Gorm)
	require.NoError(e.t, err)
	return tbl
}

// process writes items as sub-batch seq of batch id, without a coordinator.
func process[T any](t *testing.T, tbl *gormbatch.Table[T], id string, seq int, items []T) error {
	t.Helper()
	return tbl.Process(t.Context(), batch.Batch[T]{ID: id, Seq: seq, Items: items})
}

func TestBatchIDField(t *testing.T) {
	eachPath(t, func(t *testing.T, opts ...gormbatch.Option) {
		e := newEnv(t)
		tbl := e.table(opts...)
		items := orders(3)
		items[1].BatchID = "B-1" // already right
		require.NoError(t, process(t, tbl, "B-1", 1, items))
		require.Equal(t, int64(3), e.rows("B-1"), "empty fields were filled")
		require.Equal(t, "B-1", items[0].BatchID, "as gorm fills defaults, the item says what was written")

		// Through the coordinator: an item of sub-batch 2 carries another ID.
		r := start(t, tbl, batch.WithMaxBatchSize(1000))
		mixed := orders(2500)
		mixed[1200].BatchID = "OTHER"
		r.send("MIXED", mixed)
		r.shutdown()
		o := r.outcome("MIXED")
		require.Equal(t, batch.Failed, o.Status)
		require.Equal(t, 2, o.Seq)
		require.ErrorIs(t, o.Err, gormbatch.ErrBatchIDMismatch)
		require.ErrorContains(t, o.Err, `orders: item 1200 of the batch has batch ID "OTHER", not "MIXED"`)
		require.Equal(t, int64(0), e.rows("MIXED"))
		require.Equal(t, int64(0), e.rows("OTHER"), "nothing escaped the cleanup under another ID")
	})
}

// Run is a model whose batch ID lives in run_id, in a table named runs.
type Run struct {
	RunID string
	Step  int
}

func TestBatchIDColumnOption(t *testing.T) {
	eachPath(t, func(t *testing.T, opts ...gormbatch.Option) {
		e := newEnv(t)
		e.exec("CREATE TABLE runs (run_id text NOT NULL, step int NOT NULL)")
		for _, column := range []string{"run_id", "RunID"} { // column or field name
			tbl, err := gormbatch.New[Run](e.Gorm, append(opts, gormbatch.WithBatchIDColumn(column))...)
			require.NoError(t, err)
			id := "R-" + column
			require.NoError(t, process(t, tbl, id, 1, []Run{{Step: 1}, {Step: 2}}))
			require.Equal(t, int64(2), e.Count(t, "SELECT count(*) FROM runs WHERE run_id = $1", id))
			require.NoError(t, tbl.Cleanup(t.Context(), id, 1))
			require.Equal(t, int64(0), e.Count(t, "SELECT count(*) FROM runs WHERE run_id = $1", id))
		}
	})
}

func TestWithTable(t *testing.T) {
	eachPath(t, func(t *testing.T, opts ...gormbatch.Option) {
		e := newEnv(t)
		e.exec("CREATE TABLE orders_2026_01 (LIKE orders INCLUDING ALL)")
		tbl := e.table(append(opts, gormbatch.WithTable(e.Schema+".orders_2026_01"))...)
		require.NoError(t, process(t, tbl, "JAN", 1, orders(10)))
		require.Equal(t, int64(10), e.Count(t, "SELECT count(*) FROM orders_2026_01 WHERE batch_id = 'JAN'"))
		require.Equal(t, int64(0), e.rows("JAN"), "nothing in the model's own table")
		require.NoError(t, tbl.Cleanup(t.Context(), "JAN", 1))
		require.Equal(t, int64(0), e.Count(t, "SELECT count(*) FROM orders_2026_01"))
	})
}

// Rich exercises what gorm does to values on the way in: defaults, automatic
// times, serializers, NULLs, embedded structs, text for a uuid column.
type Rich struct {
	ID        uint64 `gorm:"primaryKey"`
	BatchID   string
	Qty       int      `gorm:"default:7"`
	Tags      []string `gorm:"serializer:json"`
	Ref       string
	Price     *float64
	Place     Place `gorm:"embedded;embeddedPrefix:place_"`
	CreatedAt time.Time
	UpdatedAt int64 `gorm:"autoUpdateTime:milli"`
	DeletedAt gorm.DeletedAt
}

type Place struct {
	City string
	Zip  string
}

const richDDL = `
CREATE TABLE %s (
	id         bigserial PRIMARY KEY,
	batch_id   text NOT NULL,
	qty        int NOT NULL,
	tags       jsonb,
	ref        uuid NOT NULL,
	price      double precision,
	place_city text NOT NULL,
	place_zip  text NOT NULL,
	created_at timestamptz NOT NULL,
	updated_at bigint NOT NULL,
	deleted_at timestamptz
)`

func richItems() []Rich {
	price := 9.5
	return []Rich{
		{Ref: "7b8c1a52-9e0e-4a4e-8f57-1d0c3a9b2f10"},
		{Qty: 3, Tags: []string{"a", "b"}, Ref: "0d6f4c1e-2b3a-4c5d-9e8f-7a6b5c4d3e2f", Price: &price,
			Place: Place{City: "Lyon", Zip: "69001"}, CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), UpdatedAt: 42},
	}
}

// COPY writes the same rows as gorm's Create for the same items.
func TestCopyWritesWhatGormWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec(fmt.Sprintf(richDDL, "rich_gorm") + ";" + fmt.Sprintf(richDDL, "rich_copy"))
	viaGorm, err := gormbatch.New[Rich](e.Gorm, gormbatch.WithTable("rich_gorm"))
	require.NoError(t, err)
	viaCopy, err := gormbatch.New[Rich](e.Gorm, gormbatch.WithTable("rich_copy"), gormbatch.WithCopy())
	require.NoError(t, err)
	before := time.Now().Add(-time.Minute)
	require.NoError(t, process(t, viaGorm, "R", 1, richItems()))
	require.NoError(t, process(t, viaCopy, "R", 1, richItems()))

	read := func(table string) []string {
		// quote_nullable tells NULL from the empty string.
		rows, err := e.SQL.Query(fmt.Sprintf(`SELECT concat_ws(' ', VARIADIC ARRAY(SELECT quote_nullable(v) FROM unnest(ARRAY[
			batch_id, qty::text, tags::text, ref::text, price::text, place_city, place_zip,
			(id > 0)::text, (created_at > $1)::text, (updated_at > 0)::text, (deleted_at IS NULL)::text]) v))
			FROM %s ORDER BY qty`, table), before)
		require.NoError(t, err)
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			out = append(out, s)
		}
		require.NoError(t, rows.Err())
		return out
	}
	want := []string{
		`'R' '3' '["a", "b"]' '0d6f4c1e-2b3a-4c5d-9e8f-7a6b5c4d3e2f' '9.5' 'Lyon' '69001' 'true' 'false' 'true' 'true'`,
		`'R' '7' NULL '7b8c1a52-9e0e-4a4e-8f57-1d0c3a9b2f10' NULL '' '' 'true' 'true' 'true' 'true'`,
	}
	require.Equal(t, want, read("rich_gorm"))
	require.Equal(t, want, read("rich_copy"))
}

// COPY has one column list per sub-batch: keys the database generates are
// either all given or all left to it.
func TestCopyDatabaseDefaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec(fmt.Sprintf(richDDL, "rich"))
	tbl, err := gormbatch.New[Rich](e.Gorm, gormbatch.WithTable("rich"), gormbatch.WithCopy())
	require.NoError(t, err)

	given := richItems()
	given[0].ID, given[1].ID = 1001, 1002
	require.NoError(t, process(t, tbl, "GIVEN", 1, given))
	require.Equal(t, int64(2), e.Count(t, "SELECT count(*) FROM rich WHERE id IN (1001, 1002)"))

	mixed := richItems()
	mixed[1].ID = 2002
	err = process(t, tbl, "MIXED", 1, mixed)
	require.ErrorContains(t, err, "gormbatch: copy into rich: column id has a database default and is set in 1 of 2 items; COPY needs all or none")
	require.Equal(t, int64(0), e.Count(t, "SELECT count(*) FROM rich WHERE batch_id = 'MIXED'"))
}

// Wide has 21 columns: 5000 rows need 105,000 parameters, more than one
// PostgreSQL statement takes.
type Wide struct {
	BatchID                                          string
	C1, C2, C3, C4, C5, C6, C7, C8, C9, C10          int
	C11, C12, C13, C14, C15, C16, C17, C18, C19, C20 int
}

func TestInsertSplitsAtTheParameterLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tbl := migrated[Wide](e)
	require.NoError(t, process(t, tbl, "W", 1, make([]Wide, 5000)))
	require.Equal(t, int64(5000), e.Count(t, "SELECT count(*) FROM wides WHERE batch_id = 'W'"))
	require.Equal(t, int64(1), e.Count(t, "SELECT count(DISTINCT xmin::text) FROM wides"), "one transaction")
}

var errBadNote = errors.New("bad note")

// Labelled's note refuses to be written.
type Labelled struct {
	BatchID   string
	Line      int
	Cents     int64
	Note      label
	CreatedAt time.Time
}

func (Labelled) TableName() string { return "orders" }

type label string

func (l label) Value() (driver.Value, error) {
	if l == "bad" {
		return nil, errBadNote
	}
	return string(l), nil
}

func TestValuerError(t *testing.T) {
	eachPath(t, func(t *testing.T, opts ...gormbatch.Option) {
		e := newEnv(t)
		tbl, err := gormbatch.New[Labelled](e.Gorm, opts...)
		require.NoError(t, err)
		items := []Labelled{{Note: "ok"}, {Note: "bad"}}
		err = tbl.Process(t.Context(), batch.Batch[Labelled]{ID: "L", Seq: 3, Offset: 2000, Items: items})
		require.ErrorIs(t, err, errBadNote)
		require.ErrorContains(t, err, "into orders: item 2001 of the batch, column note")
		require.Equal(t, int64(0), e.rows("L"))
	})
}

// hooked panics in gorm's BeforeCreate hook on a note "boom".
type hooked struct {
	BatchID   string
	Line      int
	Cents     int64
	Note      fuse
	CreatedAt time.Time
}

func (hooked) TableName() string { return "orders" }

func (h *hooked) BeforeCreate(*gorm.DB) error {
	if h.Line == 13 {
		panic("hook exploded")
	}
	return nil
}

// A panic inside Process, from a Valuer or a gorm hook, leaves no transaction
// open and no connection held: the next sub-batch is written.
func TestPanicLeavesNoConnectionBehind(t *testing.T) {
	eachPath(t, func(t *testing.T, opts ...gormbatch.Option) {
		e := newEnv(t)
		tbl, err := gormbatch.New[hooked](e.Gorm, opts...)
		require.NoError(t, err)
		cases := map[string]hooked{"valuer": {Note: "boom"}}
		if len(opts) == 0 {
			cases["hook"] = hooked{Line: 13} // COPY runs no hooks
		}
		for name, bad := range cases {
			items := []hooked{{Note: "fine"}, bad}
			require.Panics(t, func() { _ = process(t, tbl, "P-"+name, 1, items) }, name)
			require.Equal(t, 0, e.SQL.Stats().InUse, "%s: no connection held", name)
			require.Equal(t, int64(0), e.rows("P-"+name), "%s: rolled back", name)
		}
		require.NoError(t, process(t, tbl, "AFTER", 1, []hooked{{Note: "fine"}}))
		require.Equal(t, int64(1), e.rows("AFTER"))
	})
}

func TestCleanup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tbl := e.table()
	require.NoError(t, process(t, tbl, "A", 1, orders(3)))
	require.NoError(t, process(t, tbl, "A", 2, orders(2)))
	require.NoError(t, process(t, tbl, "B", 1, orders(2)))

	require.NoError(t, tbl.Cleanup(t.Context(), "A", 2))
	require.Equal(t, int64(0), e.rows("A"), "every sequence")
	require.Equal(t, int64(2), e.rows("B"))
	require.NoError(t, tbl.Cleanup(t.Context(), "A", 2), "idempotent")
	require.NoError(t, tbl.Cleanup(t.Context(), "NEVER-SEEN", -1))
	require.Equal(t, int64(2), e.rows("B"))
	require.NoError(t, tbl.MarkComplete(t.Context(), "B"))
	require.Equal(t, int64(2), e.rows("B"))
}

// SoftOrder has gorm's soft delete; Cleanup deletes for real all the same.
type SoftOrder struct {
	BatchID   string
	Line      int
	Cents     int64
	CreatedAt time.Time
	DeletedAt gorm.DeletedAt
}

func TestCleanupDeletesSoftDeleteModelsForReal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tbl := migrated[SoftOrder](e)
	require.NoError(t, process(t, tbl, "S", 1, make([]SoftOrder, 4)))
	require.NoError(t, tbl.Cleanup(t.Context(), "S", 1))
	require.Equal(t, int64(0), e.Count(t, "SELECT count(*) FROM soft_orders"))
}

func TestCleanupInChunks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tbl := e.table(gormbatch.WithDeleteChunk(10))
	require.NoError(t, process(t, tbl, "C", 1, orders(25)))
	require.NoError(t, process(t, tbl, "KEEP", 1, orders(3)))
	require.NoError(t, tbl.Cleanup(t.Context(), "C", 1))
	require.Equal(t, int64(0), e.rows("C"))
	require.Equal(t, int64(3), e.rows("KEEP"))
	require.Equal(t, []int64{10, 10, 5}, e.deleteStatements("C"))
	require.NoError(t, tbl.Cleanup(t.Context(), "C", 1), "idempotent")
}

// deleteStatements lists, in order, how many rows of id each DELETE removed.
func (e *env) deleteStatements(id string) []int64 {
	e.t.Helper()
	rows, err := e.SQL.Query("SELECT n FROM deletes WHERE batch_id = $1 ORDER BY ctid", id)
	require.NoError(e.t, err)
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var n int64
		require.NoError(e.t, rows.Scan(&n))
		out = append(out, n)
	}
	require.NoError(e.t, rows.Err())
	return out
}

// Cleanup honours its context: stuck behind a row lock, it returns when the
// context ends. One DELETE then leaves every row; chunks keep what they
// deleted. Either way a second call finishes.
func TestCleanupStopsWithItsContext(t *testing.T) {
	for _, chunk := range []int{0, 10} {
		t.Run(fmt.Sprintf("chunk=%d", chunk), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			tbl := e.table(gormbatch.WithDeleteChunk(chunk))
			require.NoError(t, process(t, tbl, "C", 1, orders(25)))

			locker, err := e.SQL.BeginTx(t.Context(), nil)
			require.NoError(t, err)
			defer locker.Rollback()
			var lockerPID int64
			require.NoError(t, locker.QueryRow("SELECT pg_backend_pid()").Scan(&lockerPID))
			_, err = locker.Exec("SELECT 1 FROM orders WHERE batch_id = 'C' AND line = 24 FOR UPDATE")
			require.NoError(t, err)

			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- tbl.Cleanup(ctx, "C", 1) }()
			require.Eventually(t, func() bool {
				var n int
				return e.SQL.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
					lockerPID).Scan(&n) == nil && n > 0
			}, 30*time.Second, 2*time.Millisecond, "cleanup never waited for the lock")
			cancel()
			err = <-done
			require.ErrorContains(t, err, `gormbatch: delete batch "C" from orders`)
			require.ErrorIs(t, err, context.Canceled)
			want := int64(25)
			if chunk > 0 {
				want = 5 // two chunks of ten were committed; the third waited
			}
			require.Equal(t, want, e.rows("C"))

			require.NoError(t, locker.Rollback())
			require.NoError(t, tbl.Cleanup(t.Context(), "C", 1))
			require.Equal(t, int64(0), e.rows("C"))
		})
	}
}

func TestEmptySubBatchWritesNothing(t *testing.T) {
	eachPath(t, func(t *testing.T, opts ...gormbatch.Option) {
		e := newEnv(t)
		require.NoError(t, process(t, e.table(opts...), "E", 1, nil))
		require.Equal(t, int64(0), e.Count(t, "SELECT count(*) FROM orders"))
	})
}

// With pgx's simple protocol (as for PgBouncer), COPY still works: it then
// describes the table for every sub-batch instead of keeping a prepared
// statement on the connection.
func TestCopyWithSimpleProtocol(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	db, err := gorm.Open(postgres.New(postgres.Config{DSN: e.DSN, PreferSimpleProtocol: true}), &gorm.Config{Logger: logger.Discard})
	require.NoError(t, err)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	t.Cleanup(func() { sqlDB.Close() })
	sqlDB.SetMaxOpenConns(1) // so that the check below sees the connection COPY used
	tbl, err := gormbatch.New[Order](db, gormbatch.WithCopy())
	require.NoError(t, err)
	for seq := 1; seq <= 2; seq++ {
		require.NoError(t, process(t, tbl, "S", seq, orders(10)))
	}
	require.Equal(t, int64(20), e.rows("S"))
	var prepared int64
	require.NoError(t, db.Raw("SELECT count(*) FROM pg_prepared_statements").Scan(&prepared).Error)
	require.Equal(t, int64(0), prepared, "nothing left prepared on the connection")
}

// The model may be a pointer type; the items are then the caller's structs,
// and their empty batch-ID fields are filled in place, as gorm fills keys.
func TestPointerModel(t *testing.T) {
	eachPath(t, func(t *testing.T, opts ...gormbatch.Option) {
		e := newEnv(t)
		tbl, err := gormbatch.New[*Order](e.Gorm, opts...)
		require.NoError(t, err)
		items := []*Order{{Line: 1, Cents: 5}, {Line: 2, Cents: 6}}
		require.NoError(t, process(t, tbl, "PTR", 1, items))
		require.Equal(t, int64(2), e.rows("PTR"))
		require.Equal(t, "PTR", items[1].BatchID)
		require.NoError(t, tbl.Cleanup(t.Context(), "PTR", 1))
		require.Equal(t, int64(0), e.rows("PTR"))
	})
}
