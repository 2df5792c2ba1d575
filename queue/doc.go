// Package queue is a job queue on PostgreSQL, through gorm: jobs are rows,
// claimed atomically by any number of runners in any number of processes,
// retried with backoff, rescued when their runner dies, and finished with
// exactly one completion record. Long jobs can run chunk by chunk on sheaf's
// batch engine, with progress, cancellation and all-or-nothing output.
//
// # Kinds and handlers
//
// A job's payload is a Go type that names its kind:
//
//	type ReportArgs struct{ County string }
//	func (ReportArgs) Kind() string { return "county_report" }
//
// Register a handler per kind in a Registry, with the kind's defaults, then
// build a Client (to enqueue and manage jobs) and Runners (to work them):
//
//	reg := queue.NewRegistry()
//	queue.Register(reg, queue.HandlerFunc[ReportArgs](func(ctx context.Context, j *queue.Job[ReportArgs]) error {
//		return writeReport(ctx, j.Args.County)
//	}), queue.MaxAttempts(5), queue.Retry(queue.Delays{time.Minute, 5 * time.Minute, 15 * time.Minute}))
//	client, _ := queue.NewClient(db, reg)
//	client.Migrate(ctx)
//	client.Enqueue(ctx, ReportArgs{County: "Travis"}, queue.Priority(8))
//	runner, _ := queue.NewRunner(client)
//	runner.Start(ctx)
//	defer runner.Stop(ctx)
//
// # Lifecycle
//
// A job is QUEUED until a runner claims it (PROCESSING), then COMPLETED, or
// QUEUED again after a backoff when an attempt fails, or FAILED when it has
// no attempts left or the error is Permanent (the dead letter, kept with its
// error). Cancel moves a QUEUED or PROCESSING job to CANCELLED; Retry and
// RetryFailed put FAILED and CANCELLED jobs back. Every transition is made by
// the database with its own clock: created, started and completed times, run
// times and leases are all the server's now().
//
// # Claiming
//
// A runner claims as many due jobs as it has room for in one statement
// (UPDATE ... FOR UPDATE SKIP LOCKED ... RETURNING), highest priority first,
// then earliest run time, then lowest ID, within each queue it works. Room is
// a job per free worker and, while jobs are short, the jobs its workers will
// likely finish while the next claim is on its way (see WithWorkers). The
// attempt is counted at the claim (a suspect's when it starts; see Poison
// jobs). Enqueueing notifies runners (LISTEN/NOTIFY, one
// notification per statement and queue), so an idle runner picks a job up in
// milliseconds; runners also poll (WithPollInterval) in case a notification
// is missed and for jobs whose run time arrives.
//
// While a runner works through a backlog it continues each claim where the
// last one stopped rather than rescanning the queue's index from its start
// (which, on a busy table, is a long run of entries for jobs already
// claimed). It rescans from the start when it reaches the end, when notified
// of a job of higher priority than where it is, and at least every poll
// interval, so a job enqueued with a run time in the past may wait up to one
// poll interval longer than strict order would make it.
//
// # Leases, rescue and stopping
//
// A claimed job is leased to its runner (WithLease), which renews the
// leases of all its jobs every third of a lease, on a connection of its own,
// trying again promptly when a renewal fails. The renewal also puts back in
// the queue, uncounted, jobs locked in the runner's name that it is not
// running (a claim it gave up on that the server ran anyway). If the runner
// dies, any runner rescues the job once the lease expires.
//
// Runner.Start checks the database first and fails at once if it does not
// answer or its schema is not migrated (ErrNotMigrated). Runner.Stop lets
// running jobs finish. If its context ends first (with a deadline, a little
// before it ends), Stop cancels the jobs still running and puts them back
// in the queue, without counting the attempt, before it returns, whether or
// not their handlers have returned: once Stop returns, nothing is left
// PROCESSING under the runner, and a program may exit. Whatever a handler
// that ignored its cancellation does afterwards is refused; Done is closed
// once the last has returned. Cancelling Start's context does the same. See
// the example of Runner.Stop for a worker that shuts down on SIGTERM.
//
// # Poison jobs
//
// A runner that dies takes all its jobs with it without saying which one
// killed it. So a job's first rescue gives its attempt back and makes it a
// suspect (JobRecord.Rescues). A runner runs one suspect at a time and
// counts a suspect's attempt, durably, as it starts: a job that kills its
// process reaches MaxAttempts and fails; the jobs that died beside it each
// run once on their own and complete.
//
// # Guarantees
//
// Jobs run at least once: a job whose runner dies mid-way, or whose result
// cannot be written, runs again. Each attempt's result is recorded at most
// once, and only if the job is still that attempt's (still PROCESSING, same
// attempt): a runner that finishes after its job was rescued or cancelled
// changes nothing. So a job is COMPLETED once, by one attempt. Handlers must
// therefore make their side effects idempotent, or transactional with
// something the next attempt checks: a job may have done its work and died
// before its completion was written. Chunked handlers get this from the batch
// engine: their output is cleaned up when an attempt fails and before a retry
// starts.
//
// # Chunked jobs
//
// RegisterChunked runs a job as a stream of records in chunks on the batch
// engine: the job ID is the batch ID, each chunk is one transaction, progress
// (processed, total) is saved after every chunk, cancellation is noticed at
// the next chunk, and a failed or cancelled attempt's output is removed by
// the handler's Cleanup. See Chunked.
//
// # Connections
//
// A runner holds one connection for LISTEN and three more for claims,
// completions and leases, besides what handlers use; a pool capped below
// four fails NewRunner, and Start warns when the pool's limits cannot serve
// the workers (database/sql keeps only two idle connections by default).
// Every bookkeeping statement is bounded by a fraction of the lease, so a
// lost database stalls a runner but never hangs it.
package queue
