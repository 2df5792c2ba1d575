package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
)

// postgres is the Store on PostgreSQL: claims with SKIP LOCKED, runners
// woken with LISTEN/NOTIFY, bulk inserts with COPY, dependency groups
// serialised with advisory locks.
type postgres struct {
	gdb *gorm.DB
	db  *sql.DB
}

func (*postgres) Dialect() string { return "postgres" }

func (s *postgres) Tx(ctx context.Context, db *gorm.DB, fn func(tx *gorm.DB) error) error {
	return db.WithContext(ctx).Transaction(fn)
}

// pgTime passes a time as it is: the driver sends it with its zone.
func pgTime(t time.Time) any { return t }

func (*postgres) Jobs(ctx context.Context, db *gorm.DB, f Filter, limit int, dest any) error {
	return readJobs(ctx, db, f, pgTime, pgJobColumns, limit, dest)
}

func (*postgres) Count(ctx context.Context, db *gorm.DB, f Filter) (int64, error) {
	return countJobs(ctx, db, f, pgTime)
}

func (*postgres) JobIDs(ctx context.Context, db *gorm.DB, f Filter) ([]int64, error) {
	return jobIDs(ctx, db, f, pgTime)
}

// Unmigrated reports whether err says that one of sheaf's tables or
// columns does not exist: the schema was never migrated, or was migrated by
// an older sheaf. An undefined table that is not one of sheaf's, and an
// undefined column of another table, are somebody else's, or a bug, not a
// missing migration; a missing column is taken to be of sheaf's tables
// unless the database named another, the statements being sheaf's.
func Unmigrated(err error) bool {
	table, ok := undefined(err)
	return ok && (table == "" || isSheafTable(table))
}

// isSheafTable reports whether name, perhaps schema-qualified, is one of
// sheaf's tables.
func isSheafTable(name string) bool {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	return strings.HasPrefix(name, "sheaf_")
}

// undefined reports whether err says that a table or a column does not
// exist, and names the table when the database did. PostgreSQL names the
// relation in undefined_table (42P01), which without a name is a missing
// FROM-clause entry, a bug, not a missing table; and, for some statements,
// in undefined_column (42703). SQLite says "no such table: name".
func undefined(err error) (string, bool) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		if name, ok := mysqlUndefined(err); ok {
			return name, true
		}
		return sqliteUndefined(err)
	}
	switch pe.Code {
	case "42P01":
		return quotedAfter(pe.Message, "relation ")
	case "42703":
		name, _ := quotedAfter(pe.Message, "of relation ")
		return name, true
	}
	return "", false
}

// quotedAfter returns the double-quoted name that follows prefix in msg.
func quotedAfter(msg, prefix string) (string, bool) {
	i := strings.Index(msg, prefix+`"`)
	if i < 0 {
		return "", false
	}
	name, _, ok := strings.Cut(msg[i+len(prefix)+1:], `"`)
	return name, ok
}
