// Package gormbatch persists the batch engine's sub-batches to a database
// through gorm, and cleans up failed batches, for any gorm model.
//
// A [Table] is both the processor and the cleanup strategy of a
// batch.Coordinator:
//
//	type Order struct {
//		ID      uint64 `gorm:"primaryKey"`
//		BatchID string `gorm:"index"`
//		Cents   int64
//	}
//
//	orders, err := gormbatch.New[Order](db, gormbatch.WithCopy())
//	...
//	c, err := batch.NewCoordinator[Order](orders,
//		batch.WithCleanup(orders),
//		batch.WithBufferReuse(true), // a Table keeps no reference to the items
//	)
//
// # Writing
//
// Every sub-batch is written in one transaction, committed when every item is
// in and rolled back on any error, so a sub-batch is never half written. By
// default the items go through gorm's Create, with everything gorm does:
// hooks, associations, defaults, generated keys read back. With [WithCopy]
// they go through PostgreSQL's COPY, two to three times faster, writing the
// model's columns only.
//
// The model has a string field for the batch-ID column ([DefaultBatchIDColumn]
// unless [WithBatchIDColumn] says otherwise). Items may leave it empty:
// Process fills it with the ID the item was sent with. An item that carries a
// different batch ID fails its sub-batch, because the row would escape
// Cleanup.
//
// # Cleaning up
//
// When a batch fails, the coordinator calls [Table.Cleanup], which deletes
// every row with the batch's ID, whichever sub-batch wrote it, in a
// transaction of its own (or several, with [WithDeleteChunk]). It is
// idempotent. It runs under the coordinator's cleanup timeout; with an index on
// the batch-ID column its cost follows the size of the batch, not of the
// table. If it fails, the batch's outcome carries the error in CleanupErr and
// the batch is still reported failed; calling Cleanup again later finishes the
// job.
//
// # Guarantees and limits
//
// A batch is all-or-nothing as far as this table goes: after a failure and a
// successful cleanup no row with its ID remains. Rows other code writes with
// the same batch ID are deleted too, so give every logical batch its own ID.
// Cleanup deletes from this table only: rows gorm saved in associated tables
// need ON DELETE CASCADE, or a second strategy joined with cleanup.Chain. If
// the process dies mid-batch, the committed sub-batches stay until someone
// calls Cleanup for that batch ID; the engine keeps nothing on disk.
//
// # Connections
//
// Each worker holds one connection while it writes a sub-batch or cleans up.
// Give the *sql.DB under gorm at least as many open and idle connections as
// the coordinator has workers (SetMaxOpenConns, SetMaxIdleConns), plus what
// the rest of the program needs. A connection that breaks mid-sub-batch (a
// restarted server, a terminated backend) fails that batch only: database/sql
// drops the connection and opens a new one for the next sub-batch.
package gormbatch
