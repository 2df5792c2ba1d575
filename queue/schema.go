package queue

import (
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Table names.
const jobsTable = store.JobsTable

// SchemaVersion is the schema version this release of sheaf migrates to.
const SchemaVersion = store.SchemaVersion

// Migration is the SQL that brings a schema from Version-1 to Version. Up
// records the version in the sheaf_migrations table too, which Runner.Start
// reads; version 1 creates that table.
type Migration struct {
	Version int
	Up      string
}

// Migrations returns, in order, the SQL of every schema version this sheaf
// knows, for the client's database: for teams that apply schema changes
// with their own tool (goose, golang-migrate, atlas) instead of Migrate.
// Applying them in order, each in a transaction, gives the schema Migrate
// gives. They only go forward; a way back is the team's to write.
func (c *Client) Migrations() []Migration {
	ups := c.st.Migrations()
	out := make([]Migration, len(ups))
	for i, up := range ups {
		out[i] = Migration{Version: i + 1, Up: up}
	}
	return out
}
