package queue

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// notMigrated marks err as ErrNotMigrated, keeping it in the chain, when the
// database said that one of sheaf's tables or columns does not exist: the
// schema was never migrated, or was migrated by an older sheaf. It returns
// any other error, and nil, as it is. An undefined table that is not one of
// sheaf's, and an undefined column of another table, are left alone: they
// are somebody else's, or a bug, not a missing migration.
func notMigrated(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch pe.Code {
	case "42P01": // undefined_table: relation "sheaf_jobs" does not exist
		// The same code reports a missing FROM-clause entry, a bug.
		name, ok := quotedAfter(pe.Message, "relation ")
		if !ok || !isSheafTable(name) {
			return err
		}
	case "42703": // undefined_column
		// The message names the relation only for some statements
		// (INSERT, UPDATE); a column named without one is a column of a
		// statement of sheaf's, on its tables.
		if name, ok := quotedAfter(pe.Message, "of relation "); ok && !isSheafTable(name) {
			return err
		}
	default:
		return err
	}
	return fmt.Errorf("%w: %w", ErrNotMigrated, err)
}

// quotedAfter returns the double-quoted name that follows prefix in msg.
func quotedAfter(msg, prefix string) (string, bool) {
	i := strings.Index(msg, prefix+`"`)
	if i < 0 {
		return "", false
	}
	rest := msg[i+len(prefix)+1:]
	name, _, ok := strings.Cut(rest, `"`)
	return name, ok
}

// isSheafTable reports whether name, perhaps schema-qualified, is one of
// sheaf's tables.
func isSheafTable(name string) bool {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	return strings.HasPrefix(name, "sheaf_")
}
