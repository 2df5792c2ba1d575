package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/sheaf-dev/sheaf/queue"
)

const schemaVersion = queue.SchemaVersion

// errSchemaBehind is migrate status's finding that the schema needs
// migrating.
var errSchemaBehind = errors.New("the schema needs migrating: run sheaf migrate")

func runMigrate(ctx context.Context, e *env, args []string) error {
	sub := "up"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		sub, args = args[0], args[1:]
	}
	fs, dsn := e.flags("migrate", "[up|sql|status] [flags]", `up (the default) creates or upgrades the queue's tables to this sheaf's schema
version; it is idempotent, and processes running it at once wait for each other.
A new SQLite file is created.
sql prints the SQL of every version, for the database's kind, for teams that
apply schema changes with their own tool; -from N prints those after version N.
status prints the database's schema version and this sheaf's, and exits with
3 when they differ.`)
	from := fs.Int("from", 0, "sql: print only the versions after this one")
	pos, err := e.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("migrate %s: unexpected arguments %q", sub, pos)
	}
	switch sub {
	case "up", "sql", "status":
	default:
		return usageError("migrate: unknown subcommand %q (up, sql, status)", sub)
	}
	client, _, closeDB, err := e.open(ctx, *dsn, sub == "up", nil)
	if err != nil {
		return err
	}
	defer closeDB()
	switch sub {
	case "sql":
		for _, m := range client.Migrations() {
			if m.Version > *from {
				fmt.Fprintf(e.stdout, "-- sheaf schema version %d\n%s\n\n", m.Version, m.Up)
			}
		}
		return nil
	case "status":
		v, err := client.SchemaVersion(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "schema version %d; this sheaf migrates to %d\n", v, schemaVersion)
		if v > schemaVersion {
			return queue.ErrSchemaTooNew
		}
		if v < schemaVersion {
			return errSchemaBehind
		}
		return nil
	}
	before, err := client.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if err := client.Migrate(ctx); err != nil {
		return err
	}
	if before == schemaVersion {
		fmt.Fprintf(e.stdout, "schema version %d: up to date\n", schemaVersion)
	} else {
		fmt.Fprintf(e.stdout, "migrated from schema version %d to %d\n", before, schemaVersion)
	}
	return nil
}
