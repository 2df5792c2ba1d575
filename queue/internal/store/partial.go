package store

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"gorm.io/gorm"
)

// ErrPartialSchema is wrapped by Migrate's error when the queue's tables
// are not those of the version the schema records: some were dropped by
// hand, or the version table was. Migrating over them would fail on the
// first table a migration creates that is there already, or later on one
// that is not.
var ErrPartialSchema = errors.New("queue: the queue's tables do not match the schema version recorded")

// migrationsTable records the versions applied; Migrate creates it first.
const migrationsTable = "sheaf_migrations"

// createTable finds the tables a migration creates.
var createTable = regexp.MustCompile(`(?m)^CREATE TABLE (?:IF NOT EXISTS )?(\w+)`)

// tables returns the tables that versions 1 to version of ups (Migrations)
// create, in the order they do.
func tables(ups []string, version int) []string {
	var out []string
	for _, up := range ups[:version] {
		for _, m := range createTable.FindAllStringSubmatch(up, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// checkTables fails, wrapping ErrPartialSchema, when the queue's tables
// that exist (listed by the statement list, given them all) are not those
// of version found of ups. The migrations table is left out: Migrate has
// created it if it was missing, and found is 0 then. A newer schema than
// ups is the caller's to refuse.
func checkTables(tx *gorm.DB, list string, ups []string, found int) error {
	if found > len(ups) {
		return nil
	}
	all := tables(ups, len(ups))
	var exist []string
	if err := tx.Raw(list, all).Scan(&exist).Error; err != nil {
		return fmt.Errorf("list the queue's tables: %w", err)
	}
	want := tables(ups, found)
	var present, missing, extra []string
	for _, t := range all {
		if t == migrationsTable {
			continue
		}
		has, wanted := slices.Contains(exist, t), slices.Contains(want, t)
		switch {
		case has:
			present = append(present, t)
			if !wanted {
				extra = append(extra, t)
			}
		case wanted:
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return nil
	}
	return partialSchema(found, present, missing, extra)
}

// partialSchema says what Migrate found, and the two ways out: back to
// the schema as it was, or from nothing.
func partialSchema(found int, present, missing, extra []string) error {
	var what string
	if found == 0 {
		what = fmt.Sprintf("no version is recorded (%s is missing or empty), yet %s %s there",
			migrationsTable, strings.Join(extra, ", "), areOrIs(extra))
	} else {
		what = fmt.Sprintf("%s records version %d", migrationsTable, found)
		if len(missing) > 0 {
			what += fmt.Sprintf(", whose %s %s missing", strings.Join(missing, ", "), areOrIs(missing))
		}
		if len(extra) > 0 {
			what += fmt.Sprintf(", and %s of a later version %s there", strings.Join(extra, ", "), areOrIs(extra))
		}
		present = append([]string{migrationsTable}, present...)
	}
	return fmt.Errorf("%w: %s: restore what was dropped from a backup, or drop %s (losing the jobs they hold) and call Migrate again",
		ErrPartialSchema, what, strings.Join(present, ", "))
}

func areOrIs(tables []string) string {
	if len(tables) == 1 {
		return "is"
	}
	return "are"
}
