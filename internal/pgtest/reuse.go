package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue/sqlitedb"
)

// Migrate brings a new, empty database up to date: the queue's Migrate, or
// a package's own tables.
type Migrate func(*gorm.DB) error

// NewMigratedDB returns an empty database on this run's store that migrate
// has brought up to date: a schema from NewMigrated, a copy of an SQLite
// file migrated once per process, or a new MariaDB database. key names
// what migrate makes: calls that migrate differently give different keys.
func NewMigratedDB(t testing.TB, key string, migrate Migrate) *DB {
	t.Helper()
	switch Store() {
	case "postgres":
		return NewMigrated(t, key, migrate)
	case "sqlite":
		return NewMigratedSQLite(t, key, migrate)
	}
	db := NewMySQL(t)
	if err := migrate(db.Gorm); err != nil {
		t.Fatalf("pgtest: migrate: %v", err)
	}
	return db
}

// NewMigrated returns an empty schema of the shared server that migrate
// has brought up to date.
//
// Migrating a schema costs the server more than most tests do (some
// eighty statements of DDL, and a DROP SCHEMA at the end), and a run's
// tests migrate hundreds, so a test process reuses its schemas: when a
// test ends and nothing is left connected to its schema, and the schema's
// tables, columns, indexes, constraints, functions and triggers are those
// migrate made (once the tables the test made beside them are dropped,
// with what hangs on them), its rows are deleted (but for the rows migrate itself
// wrote, which must be as it left them), its sequences start again at 1,
// and the next test of the key gets it. Otherwise it is dropped, as New's
// schemas are. The kept ones are dropped as the process ends
// (testexit.Exit). A test sees one difference from a new schema: the
// planner's statistics of a table emptied by DELETE, so tests that read
// plans use New. A test's pool of connections (DB.SQL) waits with its
// schema for the next test, if nothing in it is in use and the binary's
// TestMain wraps its tests with testexit.M, which closes the pools before
// goleak looks for their goroutines: each new connection costs the server
// a backend's start, which a whole run's tests spent tens of seconds of
// CPU on.
func NewMigrated(t testing.TB, key string, migrate Migrate) *DB {
	t.Helper()
	base := BaseDSN()
	p := reused.pool(key)
	s, err := p.get(migrate)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.Is(err, errNoServer) && !errors.As(err, &pgErr) {
			unreachable(t, base, err)
		}
		t.Fatalf("pgtest: %v", err)
	}
	db := s.parked
	s.parked = nil
	if db == nil {
		db = &DB{Schema: s.name}
		if db.DSN, db.Gorm, db.SQL, err = open(base, s.name); err != nil {
			p.give(t, s, nil)
			t.Fatalf("pgtest: %v", err)
		}
	} else {
		unpark(db.SQL)
		sizePool(db.SQL) // as open sizes it, whatever the last test did
		db.SQL.SetConnMaxLifetime(0)
	}
	t.Cleanup(func() { p.give(t, s, db) })
	return db
}

// parkedIdle is how many idle connections a schema's pool keeps while the
// schema waits for its next test.
const parkedIdle = 4

// parking reports whether a schema's pool may wait with it for the next
// test: if the binary closes the pools before goleak looks for their
// goroutines (testexit.M).
var parking = sync.OnceValue(func() bool { return testexit.BeforeCheck(reused.closePools) })

// closePools closes the pools of the schemas waiting for a test.
func (r *schemas) closePools() {
	r.mu.Lock()
	pools := slices.Collect(maps.Values(r.pools))
	r.mu.Unlock()
	for _, p := range pools {
		p.mu.Lock()
		for _, s := range p.free {
			if s.parked != nil {
				unpark(s.parked.SQL)
				_ = s.parked.SQL.Close()
				s.parked = nil
			}
		}
		p.mu.Unlock()
	}
}

// errNoServer wraps a failed connection to the server.
var errNoServer = errors.New("connect")

// reused holds each key's schemas between tests, and idle connections to
// the server that create and reset them.
var reused = &schemas{pools: map[string]*pool{}}

type schemas struct {
	mu    sync.Mutex
	pools map[string]*pool
	idle  []*pgx.Conn
}

// maxIdle bounds the connections kept between resets.
const maxIdle = 4

// pool returns key's pool.
func (r *schemas) pool(key string) *pool {
	tidyAtExit()
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pools[key]
	if p == nil {
		p = &pool{all: map[*schema]bool{}}
		r.pools[key] = p
	}
	return p
}

// conn returns an idle connection to the shared server (BaseDSN), or a
// new one.
func (r *schemas) conn(ctx context.Context) (*pgx.Conn, error) {
	base := BaseDSN()
	if c, ok := pop(&r.mu, &r.idle); ok {
		return c, nil
	}
	c, err := connect(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("%w to %s: %w", errNoServer, redact(base), err)
	}
	return c, nil
}

// pop takes the last of *list, which mu guards, if there is one.
func pop[T any](mu *sync.Mutex, list *[]T) (T, bool) {
	mu.Lock()
	defer mu.Unlock()
	var last T
	n := len(*list)
	if n == 0 {
		return last, false
	}
	last, *list = (*list)[n-1], (*list)[:n-1]
	return last, true
}

// done keeps c for the next call of conn, unless err says it may be
// broken or enough are kept.
func (r *schemas) done(c *pgx.Conn, err error) {
	r.mu.Lock()
	if err == nil && !c.IsClosed() && len(r.idle) < maxIdle {
		r.idle = append(r.idle, c)
		c = nil
	}
	r.mu.Unlock()
	if c != nil {
		_ = c.Close(context.Background())
	}
}

// tidyAtExit has the process, as it ends, drop the schemas it kept and
// vacuum the catalogs its schemas filled.
var tidyAtExit = sync.OnceFunc(func() {
	testexit.AtExit(func() {
		reused.dropAll()
		vacuumCatalogs()
	})
})

// dropped counts the schemas this process dropped on the shared server.
var dropped atomic.Int64

// catalogs are the system catalogs that creating and dropping a schema of
// tables, indexes and functions leaves dead rows in.
const catalogs = "pg_class, pg_attribute, pg_attrdef, pg_type, pg_depend, pg_index, pg_constraint, pg_proc, " +
	"pg_trigger, pg_namespace, pg_sequence, pg_statistic, pg_description"

// vacuumCatalogs vacuums the catalogs after a process that dropped many
// schemas. A server without autovacuum (a CI database, say) would
// otherwise keep their dead rows, and every later schema's DDL, and every
// later run's, reads past them: after some runs, migrating a schema took
// half again as long.
func vacuumCatalogs() {
	if dropped.Load() < 20 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := reused.conn(ctx)
	if err != nil {
		return
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "VACUUM "+catalogs); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: vacuum the catalogs: %v\n", err)
	}
}

// dropAll drops every schema made and not dropped yet, and closes the idle
// connections.
func (r *schemas) dropAll() {
	r.mu.Lock()
	pools := r.pools
	r.pools = map[string]*pool{}
	r.mu.Unlock()
	base := BaseDSN()
	for _, p := range pools {
		p.mu.Lock()
		all := p.all
		p.all, p.free = map[*schema]bool{}, nil
		p.mu.Unlock()
		for s := range all {
			if err := dropSchema(base, s.name); err != nil {
				fmt.Fprintf(os.Stderr, "pgtest: drop schema %s: %v\n", s.name, err)
			}
		}
	}
	r.closeIdle()
}

// pool is one key's schemas.
type pool struct {
	mu sync.Mutex
	// want is the layout of the key's first migrated schema: a schema is
	// kept only if it was migrated alike.
	want string
	free []*schema
	all  map[*schema]bool // every schema made and not yet dropped
}

// schema is a migrated schema and what checks and resets it.
type schema struct {
	name string
	// alike says the migration made it as the key's first (layoutSQL);
	// versions is what versionsSQL read right after the migration, seeds
	// the rows the migration wrote, as seedsSQL read them.
	alike           bool
	versions, seeds string
	seedTables      []string
	// tables are the tables the migration made; a test's own tables, made
	// beside them, are dropped before the schema is checked for reuse.
	tables []string
	// reset deletes the rows and restarts the sequences.
	reset string
	// parked is the last test's pool of connections to the schema, which
	// the next test takes, if it was kept (see give).
	parked *DB
}

// get returns a kept schema of the pool, or makes one.
func (p *pool) get(migrate Migrate) (*schema, error) {
	if s, ok := pop(&p.mu, &p.free); ok {
		return s, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := reused.conn(ctx)
	if err != nil {
		return nil, err
	}
	name, err := createSchema(ctx, c, "sheaf_test_")
	if err != nil {
		reused.done(c, err)
		return nil, fmt.Errorf("create schema: %w", err)
	}
	s := &schema{name: name}
	p.mu.Lock()
	p.all[s] = true
	p.mu.Unlock()
	err = migrateOn(name, migrate)
	var layout string
	if err == nil {
		err = c.QueryRow(ctx, layoutSQL, name).Scan(&layout)
	}
	if err == nil {
		err = c.QueryRow(ctx, versionsSQL, name).Scan(&s.versions)
	}
	if err == nil {
		err = c.QueryRow(ctx, seedsSQL, name).Scan(&s.seeds, &s.seedTables)
	}
	if err == nil {
		err = c.QueryRow(ctx, resetSQL, name).Scan(&s.reset)
	}
	if err == nil {
		err = c.QueryRow(ctx, tablesSQL, name).Scan(&s.tables)
	}
	reused.done(c, err)
	if err != nil {
		p.drop(s)
		return nil, fmt.Errorf("migrate schema %s: %w", name, err)
	}
	p.mu.Lock()
	if p.want == "" {
		p.want = layout
	}
	s.alike = layout == p.want
	p.mu.Unlock()
	return s, nil
}

// migrateOn runs migrate on a connection pool of its own to schema.
func migrateOn(schema string, migrate Migrate) error {
	_, gdb, sqlDB, err := open(BaseDSN(), schema)
	if err != nil {
		return err
	}
	return errors.Join(migrate(gdb), sqlDB.Close())
}

// give takes back a test's schema, and db, the test's pool of connections
// to it (nil if none was opened): it keeps the schema for the next test if
// it can reset it, and drops it otherwise. The pool waits with the schema
// if parking allows and nothing in it is in use; otherwise it is closed
// (as the test may have closed it).
func (p *pool) give(t testing.TB, s *schema, db *DB) {
	keep := db != nil && s.alike && parking() && db.SQL.Stats().InUse == 0 && ping(db.SQL) == nil
	open := 0
	if keep {
		db.SQL.SetMaxIdleConns(parkedIdle)
		db.SQL.SetConnMaxIdleTime(0) // parkedBudget bounds them
		open = db.SQL.Stats().OpenConnections
	} else if db != nil {
		_ = db.SQL.Close()
	}
	// unparked closes the pool that was to wait with the schema, when the
	// schema is not kept after all.
	unparked := func() {
		if keep {
			_ = db.SQL.Close()
		}
	}
	if s.alike {
		ok, err := p.clean(s, open)
		if err == nil && ok {
			p.mu.Lock()
			kept := p.all[s] // not if the process dropped it meanwhile
			if kept {
				p.free = append(p.free, s)
				if keep {
					s.parked = db
					park(db.SQL)
				}
			}
			p.mu.Unlock()
			if !kept {
				unparked()
			}
			return
		}
	}
	unparked()
	if err := p.drop(s); err != nil {
		t.Errorf("pgtest: drop schema %s: %v", s.name, err)
	}
}

// drop drops s.
func (p *pool) drop(s *schema) error {
	p.mu.Lock()
	delete(p.all, s)
	p.mu.Unlock()
	return dropSchema(BaseDSN(), s.name)
}

// ping checks that db works: the test may have closed it.
func ping(db *sql.DB) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

// clean resets s and reports whether it is fit for another test: nothing
// connected to it but the open idle connections of its test's pool, its
// catalog rows and the migration's rows as they were.
func (p *pool) clean(s *schema, open int) (ok bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := reused.conn(ctx)
	if err != nil {
		return false, err
	}
	defer func() { reused.done(c, err) }()
	// A closed pool's backends end a moment after their connections close;
	// one still there after a second, beyond the test's pool's, belongs to
	// something the test left running, and the schema is not reused.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(time.Second); ; {
		var n int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, s.name).Scan(&n); err != nil {
			return false, err
		}
		if n <= open {
			break
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		<-tick.C
	}
	// Tests make tables of their own (a handler's rows, a ledger of
	// runs): dropping them costs the server far less than a new schema's
	// migration. Whatever else a test changed (a trigger, a column) is
	// caught below, and the schema dropped.
	var drop string
	if err := c.QueryRow(ctx, dropTablesSQL, s.name, s.tables).Scan(&drop); err != nil {
		return false, err
	}
	if drop != "" {
		if _, err := c.Exec(ctx, drop); err != nil {
			return false, err
		}
	}
	var versions, seeds string
	if err := c.QueryRow(ctx, versionsSQL, s.name).Scan(&versions); err != nil || versions != s.versions {
		return false, err
	}
	if err := c.QueryRow(ctx, seedRowsSQL, s.name, s.seedTables).Scan(&seeds); err != nil || seeds != s.seeds {
		return false, err
	}
	if _, err := c.Exec(ctx, s.reset); err != nil {
		return false, err
	}
	return true, nil
}

// layoutSQL reads what a migration made of schema $1: tables and their
// columns, indexes, constraints, functions and triggers, with the
// schema's name left out, so that two schemas migrated alike read the
// same.
const layoutSQL = `
SELECT replace(coalesce(string_agg(d, E'\n' ORDER BY d), ''), quote_ident($1::text) || '.', '')
FROM (
	SELECT 'rel ' || c.relname || ' ' || c.relkind::text || ' ' || coalesce(array_to_string(c.reloptions, ','), '') || ' (' ||
		coalesce((SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull || ' ' ||
			coalesce(pg_get_expr(ad.adbin, ad.adrelid), ''), ', ' ORDER BY a.attnum)
		FROM pg_attribute a LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
		WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '') || ')'
	FROM pg_class c WHERE c.relnamespace = $1::text::regnamespace
	UNION ALL
	SELECT 'index ' || pg_get_indexdef(i.indexrelid)
	FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid WHERE c.relnamespace = $1::text::regnamespace
	UNION ALL
	SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
	FROM pg_constraint WHERE connamespace = $1::text::regnamespace
	UNION ALL
	SELECT 'function ' || p.oid::regprocedure::text || ' ' || md5(p.prosrc) || ' ' || coalesce(array_to_string(p.proconfig, ','), '')
	FROM pg_proc p WHERE p.pronamespace = $1::text::regnamespace
	UNION ALL
	SELECT 'trigger ' || pg_get_triggerdef(t.oid) || ' ' || t.tgenabled::text
	FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE c.relnamespace = $1::text::regnamespace AND NOT t.tgisinternal
) s(d)`

// versionsSQL reads which versions of the catalogs' rows describe schema
// $1's relations, columns, defaults, indexes, constraints, functions and
// triggers: any DDL on them writes new versions (another xmin), or new rows
// or none. Cheaper than layoutSQL, which renders them, it tells whether one
// schema changed, not whether two are alike.
const versionsSQL = `
WITH rel AS (SELECT oid, xmin FROM pg_class WHERE relnamespace = $1::text::regnamespace)
SELECT md5(concat_ws(E'\n',
	(SELECT string_agg(oid || ' ' || xmin, ',' ORDER BY oid) FROM rel),
	(SELECT string_agg(a.attrelid || ' ' || a.attnum || ' ' || a.xmin, ',' ORDER BY a.attrelid, a.attnum)
		FROM pg_attribute a JOIN rel ON rel.oid = a.attrelid),
	(SELECT string_agg(d.oid || ' ' || d.xmin, ',' ORDER BY d.oid) FROM pg_attrdef d JOIN rel ON rel.oid = d.adrelid),
	(SELECT string_agg(i.indexrelid || ' ' || i.xmin, ',' ORDER BY i.indexrelid) FROM pg_index i JOIN rel ON rel.oid = i.indrelid),
	(SELECT string_agg(oid || ' ' || xmin, ',' ORDER BY oid) FROM pg_constraint WHERE connamespace = $1::text::regnamespace),
	(SELECT string_agg(oid || ' ' || xmin, ',' ORDER BY oid) FROM pg_proc WHERE pronamespace = $1::text::regnamespace),
	(SELECT string_agg(t.oid || ' ' || t.xmin, ',' ORDER BY t.oid) FROM pg_trigger t JOIN rel ON rel.oid = t.tgrelid)))`

// tablesSQL reads the names of schema $1's tables.
const tablesSQL = `
SELECT coalesce(array_agg(relname::text ORDER BY relname), '{}')
FROM pg_class WHERE relnamespace = $1::text::regnamespace AND relkind IN ('r', 'p')`

// dropTablesSQL makes the statement that drops the tables of schema $1
// not named in $2, in one transaction, or an empty string if there are
// none. A lock left behind fails it rather than stalls it.
const dropTablesSQL = `
SELECT coalesce('SET LOCAL lock_timeout = ''5s''; DROP TABLE ' ||
	string_agg(format('%I.%I', $1::text, relname), ', ') || ' CASCADE', '')
FROM pg_class
WHERE relnamespace = $1::text::regnamespace AND relkind IN ('r', 'p') AND NOT relname::text = ANY($2)`

// seedsSQL reads the rows of schema $1's tables that have any: right after
// a migration, the rows it wrote (its versions), which a reset keeps. It
// returns their names too, for seedRowsSQL to read them again.
const seedsSQL = `
SELECT coalesce(string_agg(tablename || ' ' || rows, E'\n' ORDER BY tablename), ''), coalesce(array_agg(tablename), '{}')
FROM (
	SELECT tablename, (xpath('/row/r/text()', query_to_xml(format(
		'SELECT md5(string_agg(t::text, E''\n'' ORDER BY t::text)) AS r FROM %I.%I t', schemaname, tablename), false, true, '')))[1]::text AS rows
	FROM pg_tables WHERE schemaname = $1
) s WHERE rows IS NOT NULL`

// seedRowsSQL reads the rows of schema $1's tables $2 as seedsSQL does.
const seedRowsSQL = `
SELECT coalesce(string_agg(tablename || ' ' || rows, E'\n' ORDER BY tablename), '')
FROM (
	SELECT tablename, (xpath('/row/r/text()', query_to_xml(format(
		'SELECT md5(string_agg(t::text, E''\n'' ORDER BY t::text)) AS r FROM %I.%I t', schemaname, tablename), false, true, '')))[1]::text AS rows
	FROM pg_tables WHERE schemaname = $1 AND tablename = ANY($2)
) s WHERE rows IS NOT NULL`

// resetSQL makes the statement that deletes the rows of schema $1's tables
// that have none right after the migration, and restarts its sequences,
// in one transaction. A row lock left behind fails it rather than stalls
// it, and the schema is dropped.
const resetSQL = `
SELECT 'SET LOCAL lock_timeout = ''5s''; ' || coalesce((
	SELECT string_agg(format('DELETE FROM %I.%I', schemaname, tablename), '; ' ORDER BY tablename)
	FROM pg_tables
	WHERE schemaname = $1 AND NOT (xpath('/row/e/text()', query_to_xml(format(
		'SELECT EXISTS (SELECT 1 FROM %I.%I) AS e', schemaname, tablename), false, true, '')))[1]::text::boolean), 'SELECT 1') ||
	coalesce((SELECT '; ' || string_agg(format('SELECT setval(%L, 1, false)', quote_ident(schemaname) || '.' || quote_ident(sequencename)), '; ')
	FROM pg_sequences WHERE schemaname = $1), '')`

// sqliteTemplates holds, per key, an SQLite file migrated once.
var sqliteTemplates struct {
	mu    sync.Mutex
	dir   string
	files map[string]string
}

// NewMigratedSQLite returns a copy, in the test's temporary folder, of an
// SQLite file that migrate brought up to date once in this process (the
// first call for key migrates it), opened as NewSQLite opens its file.
func NewMigratedSQLite(t testing.TB, key string, migrate Migrate) *DB {
	t.Helper()
	file, err := sqliteTemplate(key, migrate)
	if err != nil {
		t.Fatalf("pgtest: migrate an SQLite file: %v", err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	path := filepath.Join(t.TempDir(), "sheaf.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return openSQLite(t, path)
}

// sqliteTemplate returns key's migrated file, making it on the first call.
func sqliteTemplate(key string, migrate Migrate) (string, error) {
	tm := &sqliteTemplates
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if file, ok := tm.files[key]; ok {
		return file, nil
	}
	if tm.dir == "" {
		dir, err := os.MkdirTemp("", "sheaf-sqlite-templates-")
		if err != nil {
			return "", err
		}
		tm.dir, tm.files = dir, map[string]string{}
		testexit.AtExit(func() { _ = os.RemoveAll(dir) })
	}
	file := filepath.Join(tm.dir, fmt.Sprintf("%d.db", len(tm.files)))
	db, err := sqlitedb.Open(file)
	if err != nil {
		return "", err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return "", err
	}
	// Closing the last connection writes the log into the file.
	if err := errors.Join(migrate(db), sqlDB.Close()); err != nil {
		return "", err
	}
	tm.files[key] = file
	return file, nil
}
