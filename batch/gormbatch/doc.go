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
// Every error keeps the database's: the outcome's *batch.ProcessError has
// the batch ID and the sequence, the Table's error inside it names the table
// ("gormbatch: insert into orders: ..."), and errors.As finds the
// *pgconn.PgError with its SQLSTATE and constraint.
//
// # Options
//
//   - [WithCopy]: write each sub-batch with binary COPY through pgx instead
//     of gorm's Create. gorm hooks do not run, associations are not saved,
//     generated keys are not read back; PostgreSQL through pgx only
//     ([ErrNotPostgres] otherwise).
//   - [WithBatchIDColumn]: the column that holds the batch ID, default
//     [DefaultBatchIDColumn]; the model needs a string field for it.
//   - [WithTable]: write to and clean up another table of the same shape,
//     such as "sales.orders_2026_11"; default the model's table.
//   - [WithDeleteChunk]: clean up n rows per transaction (by ctid), so that
//     a cleanup stopped by its timeout keeps its progress; PostgreSQL only.
//     Default one DELETE.
//
// # Cleaning up
//
// When a batch fails, the coordinator calls [Table.Cleanup], which deletes
// every row with the batch's ID, whichever sub-batch wrote it, in a
// transaction of its own (or several, with [WithDeleteChunk]). It is
// idempotent. It runs under the coordinator's cleanup timeout; with an index on
// the batch-ID column its cost follows the size of the batch, not of the
// table. It deletes for real even for soft-delete models. A delete that
// fails because the server was unavailable (a broken connection, a server
// restarting or full, a lost deadlock) is tried again, with pauses that grow
// to a second, until the context ends; one that timed out or was refused is
// not. If it fails, the batch's outcome carries the error in CleanupErr and
// the batch is still reported failed; calling Cleanup again later, with a
// context that has a deadline, finishes the job.
//
// # Guarantees and limits
//
// One transaction per sub-batch: the gorm path runs BEGIN, one INSERT
// (several if the rows need more than 65,535 parameters), COMMIT; the COPY
// path runs BEGIN, COPY ... FROM STDIN BINARY, COMMIT on the pgx connection
// under gorm's *sql.DB. Any error rolls the sub-batch back, and the batch
// fails at that sequence number.
//
// A hard stop cancels a sub-batch's statements, but not a COMMIT already
// sent: the Table waits for its answer (up to 30 s). A COMMIT cut short
// would leave its fate unknown, and if it landed after the cleanup's DELETE
// had looked, the sub-batch's rows would stay behind.
//
// Panics in the model's Valuers, serializers or gorm hooks roll the
// sub-batch back, release the connection and fail the batch (sequence -1).
// The COPY path encodes rows on the worker's goroutine rather than pgx's,
// and the gorm path calls Valuers before handing rows to database/sql: a
// panic inside database/sql would leave its transaction locked, and the
// rollback would wait forever.
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
// drops the connection and opens a new one for the next sub-batch. The
// batch's cleanup tries again until the server answers (within the
// coordinator's cleanup timeout), so a batch cut short by a restart is
// cleaned up once the server is back.
//
//	sqlDB, _ := db.DB()
//	sqlDB.SetMaxOpenConns(batch.DefaultWorkers + 2) // a connection per worker, and some for the program
//	sqlDB.SetMaxIdleConns(batch.DefaultWorkers + 2) // database/sql keeps 2 idle by default
//
// # Testing
//
// The package's tests run against a real PostgreSQL: the one in
// TEST_DATABASE_URL, by default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable. Every test gets
// a schema of its own, dropped when it ends, so tests run in parallel and
// leave nothing behind. When no server answers they are skipped with a
// message saying so, and fail instead when CI is set. The role needs to
// create schemas, tables, functions and triggers, to call
// pg_terminate_backend on its own backends, and to run CHECKPOINT for the
// benchmarks (they carry on without it). The tests that restart a server
// use a cluster of their own (Debian's pg_createcluster, as root, on a port
// from 5400 to 5499), and skip where they cannot create one.
//
// The program in examples/orders runs a Table against a server: five
// interleaved batches, one of which breaks a CHECK constraint in its third
// sub-batch and is cleaned up.
package gormbatch
