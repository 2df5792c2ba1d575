// Package queue is a job queue on PostgreSQL or SQLite, through gorm: jobs
// are rows, claimed atomically by any number of runners in any number of
// processes, retried with backoff, rescued when their runner dies, and
// finished with exactly one completion record. Long jobs can run chunk by
// chunk on sheaf's batch engine, with progress, cancellation and
// all-or-nothing output. Schedules, batch windows, dependency rules and the
// morning review organise nightly work on the same queue.
//
// # Kinds, handlers and the first job
//
// A job's payload is a Go type that names its kind:
//
//	type ReportArgs struct{ County string }
//
//	func (ReportArgs) Kind() string { return "county_report" }
//
// Register a handler per kind in a [Registry], with the kind's defaults,
// then build a [Client] (to enqueue and manage jobs) and [Runner]s (to work
// them):
//
//	reg := queue.NewRegistry()
//	err := queue.Register(reg, queue.HandlerFunc[ReportArgs](func(ctx context.Context, j *queue.Job[ReportArgs]) error {
//		return writeReport(ctx, j.Args.County, j.Auth) // Auth: the submitter's claims
//	}), queue.MaxAttempts(5))
//	client, err := queue.NewClient(db, reg)
//	err = client.Migrate(ctx) // idempotent; safe from every process at once
//	res, err := client.Enqueue(ctx, ReportArgs{County: "Travis"},
//		queue.Priority(8), queue.IdempotencyKey("travis-2025-12-08"), queue.CorrelationID(requestID))
//	runner, err := queue.NewRunner(client) // 100 workers, queue "default"
//	err = runner.Start(context.Background())
//	recs, err := client.Wait(ctx, res.Job.ID) // until COMPLETED, FAILED or CANCELLED
//
// db is a *gorm.DB: opened with gorm's PostgreSQL driver (pgx), or on an
// SQLite file with package github.com/sheaf-dev/sheaf/queue/sqlitedb. How
// to stop the runner is under Shutting down.
//
// [Client.Tx] enqueues inside a transaction of yours, so the job exists if
// and only if your own writes commit; runners hear of it at the commit:
//
//	err := db.Transaction(func(tx *gorm.DB) error {
//		if err := tx.Create(&order).Error; err != nil {
//			return err
//		}
//		_, err := client.Tx(tx).Enqueue(ctx, InvoiceArgs{OrderID: order.ID})
//		return err
//	})
//
// client.Tx(tx) returns a [TxClient]: every call on it (enqueues, Get,
// List, Count, Cancel, Retry, RetryFailed, CancelMatching, PauseQueue and
// ResumeQueue, Queues, Stats, Attempts, Children, Runs, Review,
// ScheduleStates, RecordAudit and AuditLog) runs in your transaction, sees
// its uncommitted writes, and is undone if it rolls back. What does not
// belong in a transaction (Migrate, Wait, Ping, Runners, SchemaVersion,
// Activity) is only on [Client], and so is NewRunner's argument. A pause
// made in a transaction takes effect at commit (on SQLite, runners see it
// within a poll interval), and so does a cancellation (on SQLite, the
// running job's context is cancelled at its runner's next lease renewal,
// within a third of the lease; a transaction that rolls back cancels
// nothing).
//
// [Client.EnqueueMany] enqueues several jobs in one statement, and
// [Client.EnqueueBulk] many thousands at once (COPY on PostgreSQL, prepared
// multi-row INSERTs on SQLite).
//
// # Lifecycle
//
// A job moves between five statuses:
//
//   - (new) → QUEUED: Enqueue, EnqueueMany, EnqueueBulk, a schedule's tick,
//     a dependency rule.
//   - QUEUED → PROCESSING: a runner claims it. The attempt is counted here;
//     a suspect's when it starts (see Poison jobs).
//   - QUEUED → CANCELLED: [Client.Cancel].
//   - PROCESSING → COMPLETED: the handler returned nil.
//   - PROCESSING → QUEUED: the attempt failed and attempts remain (after the
//     backoff); its lease expired (rescue: the first time without the
//     attempt counting); or, without the attempt counting, the runner
//     stopped before the job finished, a job claimed ahead waited too long
//     for a worker, or the runner found the job held in its name without
//     running it.
//   - PROCESSING → FAILED: the last attempt failed, the error was
//     [Permanent], or a suspect's lease expired on its last attempt. This is
//     the dead letter, kept with its error.
//   - PROCESSING → CANCELLED: Cancel; the handler's context is cancelled
//     with cause [ErrCancelled].
//   - FAILED or CANCELLED → QUEUED: [Client.Retry], or [Client.RetryFailed]
//     for every failed job a filter selects.
//
// On PostgreSQL every time is the database's: created, started and completed
// times, run times, backoffs and leases all come from now() on the server.
// On SQLite, which runs inside the program, they come from the program's
// clock.
//
// # How a runner works
//
// A runner is a handful of parts (in queue/internal/run), each owning its
// goroutines with its own Start and Stop: the claim loop, the workers, the
// completer that writes results, the lease renewer, the maintenance
// leader (see Maintenance), the listener and the schedule loop. [Runner.Start] starts them; [Runner.Stop]
// stops them in order (claims first, then, once the workers have run what
// was claimed, the lease keepers and the completer), so no goroutine
// outlives [Runner.Done].
//
// Claiming. One statement claims as many due jobs as the runner has room
// for, highest priority first, then earliest run time, then lowest ID,
// within each queue it works: on PostgreSQL UPDATE ... FROM (SELECT ... FOR
// UPDATE SKIP LOCKED LIMIT n) ... RETURNING, through a partial index in that
// order; on SQLite one UPDATE ... RETURNING under the write lock. While it
// works through a backlog a runner continues each claim where the last one
// stopped instead of rescanning the index from its start, which on a busy
// table is a long run of entries for jobs already claimed; it rescans when
// it reaches the end, when notified of a job of higher priority, and at
// least every poll interval.
//
// Claiming ahead. Room is one job per free worker, plus, for a runner with
// two or more workers, the jobs its workers will likely finish while the
// next claim is on its way: workers × claim time ÷ job time, from moving
// averages of both, at most as many again as it has workers. So workers do
// not sit idle waiting for the database: jobs no longer than a claim move
// in claims twice the size, and jobs of a second or more get next to
// nothing ahead. The averages are over every kind the runner works, so in a
// queue that mixes very short and very long jobs a long one may be claimed
// ahead: a job claimed ahead that waits 100 ms for a worker goes back to the
// queue without its attempt counting ([EventRequeued]), keeping its place,
// for another runner to take, and claiming ahead stops until jobs are short
// again. A runner with one worker holds one job at a time.
//
// Waking. On PostgreSQL, enqueueing sends one NOTIFY per statement and
// queue (not one per job), carrying the schema, so that two applications
// sharing a database never wake or cancel each other's jobs. An idle runner
// claims within milliseconds; a retried job wakes its runner when its
// backoff ends; a poll ([WithPollInterval]) catches anything missed. On
// SQLite, see Running on SQLite.
//
// Leases. A claimed job is leased to its runner ([WithLease]). The runner
// renews the leases of every job it holds each third of the lease, on a
// connection of its own. A renewal that fails is tried again promptly and
// then every thirtieth of a lease, each try bounded by a tenth of it, so a
// lease is lost only when the runner cannot reach the database for about
// the lease's length, not because one statement failed. The same statement
// puts back, without counting their attempt, the jobs locked in the
// runner's name that it is not running: those of a claim the runner gave up
// on (a statement timeout, a network that stopped delivering) that the
// server ran anyway. When a runner dies, freezes, or is cut off for a whole
// lease, the runner that leads the maintenance rescues its jobs once their
// leases expire; the job's last error names the runner that lost it and the
// runner that rescued it.
//
// Results. Finished attempts are written in batches, one statement for
// however many arrived while the previous one ran. Every write is guarded by
// the job and its claim, so a result that arrives after the job was rescued
// or cancelled changes nothing ([EventRejected]); one from a job that Stop
// put back is dropped. A write that is retried after its reply was lost,
// and finds its own result already there, counts as written.
//
// Bookkeeping. Claims, results, renewals and progress run on contexts that a
// job's cancellation does not cancel, each statement bounded by a sixth of
// the lease, but never less than 1 s nor more than 10 s. A write that fails
// is retried, with growing pauses, until it succeeds, as long as the error
// is one that can pass (a broken connection, a timeout, a server shutting
// down or out of connections, a serialisation failure): what it writes is
// work done, whose lease the runner keeps renewing meanwhile. Once Stop has
// run out of time, each write gets one more try.
//
// # Poison jobs
//
// A process that dies takes every job it was running with it, and does not
// say which of them killed it. So the first rescue of a job gives its
// attempt back and makes it a suspect (JobRecord.Rescues). Each runner runs
// one suspect at a time, beside its ordinary jobs, and counts a suspect's
// attempt when it starts, in the database, before its handler runs. A
// suspect that kills its process again has used an attempt, and after
// MaxAttempts of them it is FAILED; the jobs that died beside it run once
// more, each on its own, and complete. A suspect whose attempt finishes,
// well or badly, is an ordinary job again.
//
// # Handlers, retries and dead letters
//
// A handler returns nil to complete the job. Any other error retries it
// after the kind's or the job's backoff: [Exponential] (the default: 1 s
// doubling to 5 min, ±10%), [Linear], or [Delays] (fixed steps). A kind may
// use any [Backoff]; a job's own must be one of these three, because it is
// stored with the job. [Permanent] fails the job at once; so does a payload
// that no longer decodes. A panic, or a runtime.Goexit, is a failed
// attempt; a kind's own Backoff that panics gets the default's delay.
// A kind's [Timeout] cancels an attempt's context when it passes, with cause
// [ErrTimeout], and the attempt fails.
//
// The last failure leaves the job FAILED with its error: list such jobs
// with [Client.List], react to them with an observer ([EventFailed]), and
// put them back with Retry or RetryFailed.
//
// Chunked jobs run on the batch engine: [RegisterChunked] takes a handler
// that returns the job's record count and an iterator (or [Pages] over a
// fetch-by-offset function) and writes one chunk per call. The job ID is
// the batch ID; progress (processed, total) is saved after every chunk,
// which also notices a cancellation; a failed or cancelled attempt's output
// is removed by the handler's Cleanup, which also runs before any attempt
// that an earlier one may have written for, in case that one died or lost
// the job without cleaning up. An attempt that lost its job (its lease
// expired and another attempt has it now) does not clean up: the output is
// the other attempt's.
//
// # Exactly-once effects: completing in the handler's transaction
//
// A handler whose effects are rows in the queue's database can make them
// happen exactly once: it writes them and completes its job in one
// transaction, with [Job.CompleteTx], called last, just before the commit:
//
//	func (h *Totals) Work(ctx context.Context, j *queue.Job[CountyReport]) error {
//		return h.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
//			if err := tx.Create(&Total{County: j.Args.County, Sum: 42}).Error; err != nil {
//				return err
//			}
//			return j.CompleteTx(ctx, tx)
//		})
//	}
//
// The job is COMPLETED if and only if the transaction commits. A process
// that dies before the commit leaves neither the rows nor the completion:
// the job is rescued when its lease expires and runs again. One that dies
// after the commit leaves both, and the job never runs again. Children that
// dependency rules release are inserted in the same transaction; to
// enqueue other follow-up jobs in the same commit, use Client.Tx(tx).
//
// CompleteTx returns [ErrLeaseLost] when the job is no longer this
// attempt's (cancelled, rescued, or already completed): return it, so the
// transaction rolls back. Once the handler returns, the runner reads
// whether the transaction committed. If it did, the attempt is completed,
// whatever the handler returned. If not (a rollback, or a handler that
// returned nil after one), the attempt failed and retries or fails as
// usual; a transaction the handler left open is rolled back. CompleteTx
// refuses, with [ErrInvalidOption], a *gorm.DB that is not a transaction,
// a transaction on another database, and a chunked job, which completes
// after its last chunk.
//
// From CompleteTx to the commit the transaction holds the job's row:
// cancelling the job waits for it, and lease renewals skip it rather than
// wait. A stop out of time that cuts the handler short rolls the
// transaction back (unless it is committing) and puts the job back. On SQLite a transaction that has written holds the database's write
// lock, so keep it short. Knowing whether it committed costs one read of
// the job's row after the handler returns. Effects outside the database
// (HTTP calls, files, messages) cannot share the transaction: they are at
// least once and need their own idempotency.
//
// # Operating the queue
//
// [Client.PauseQueue] stops every runner, in every process, from claiming
// the queue's jobs; running jobs finish, and new ones wait QUEUED until
// [Client.ResumeQueue]. [Client.Queues] counts each queue's jobs by status,
// with its oldest due job's wait and whether it is paused;
// [Client.Attempts] lists a job's last 20 attempts with their runner,
// times, outcome and error. Filter.Search finds text in the arguments and
// last errors, Filter.Newest and Filter.BeforeID page from the newest job,
// and [Client.CancelMatching] cancels every queued and running job a filter
// selects. [Client.Runners] lists the runners seen lately, and
// [Client.RecordAudit] and [Client.AuditLog] keep an application's record of
// what its operators did. Package github.com/sheaf-dev/sheaf/queue/console
// serves all of this over HTTP, with a dashboard.
//
// # Options
//
// Options are typed by where they go, so one given where it does not apply
// does not compile: [ClientOption] (NewClient), [RunnerOption] (NewRunner),
// [RegisterOption] (Register), [ChunkedOption] (RegisterChunked: Register's
// options and [ChunkSize]), [EnqueueOption] (Enqueue, EnqueueRaw, [Params]).
// [WithLogger], [WithObserver] and [WithHooks] return an [InstrumentOption],
// good for a client and a runner; [OnQueue], [Priority], [MaxAttempts] and
// [RetryBackoff] return a [JobOption], good for a kind and a job.
//
// Client and runner options (a runner uses its client's logger and observer
// unless given its own, and adds its own hooks to its client's):
//
//   - [WithLogger]: default slog.Default. Jobs are logged with ID, kind,
//     attempt and correlation ID, never payload or auth.
//   - [WithObserver]: default none. Events: started, completed, retrying,
//     failed, cancelled, rescued, requeued, rejected, released, scheduled.
//   - [WithHooks]: default none; what package otelqueue installs.
//   - [WithWorkers] (runner): jobs at once, default [DefaultWorkers], 1 to
//     [MaxWorkers] (see Claiming ahead).
//   - [WithQueues] (runner): the queues it works, default [DefaultQueue].
//   - [WithPollInterval] (runner): the fallback for missed notifications and
//     for jobs whose run time arrives, default [DefaultPollInterval].
//   - [WithLease] (runner): how long a job stays the runner's without
//     renewal, default [DefaultLease]; bookkeeping timeouts are fractions of
//     it.
//   - [WithRescueInterval] (runner): how often it looks for expired leases
//     while it leads the maintenance, default half the lease.
//   - [WithMaintenance] (runner): tasks it runs while it leads the
//     maintenance; [WithoutMaintenance]: it never leads.
//   - [WithRunnerID] (runner): the name it locks jobs with, default host,
//     process ID and a random suffix.
//   - [WithClock] (client or runner): the clock of schedules and windows,
//     default the system's; a runner uses its client's unless given its own.
//
// Job options, given to Register (the kind's defaults) or to Enqueue (the
// job's own):
//
//   - [OnQueue] (kind or job): default [DefaultQueue].
//   - [Priority] (kind or job): [MinPriority] to [MaxPriority], higher
//     first, default [DefaultPriority].
//   - [MaxAttempts] (kind or job): default [DefaultMaxAttempts], 1 to 1000.
//   - [RetryBackoff] (kind or job): default [DefaultBackoff], exponential
//     from 1 s to 5 min.
//   - [Timeout] (kind): default none.
//   - [ChunkSize] (kind, RegisterChunked): default [DefaultChunkSize].
//   - [During] (kind): only start in a daily window.
//   - [RunAt], [After] (job): default now.
//   - [IdempotencyKey] (job): a second job with the key creates nothing and
//     returns the first, marked Duplicate.
//   - [CorrelationID], [AuthContext], [InRun], [InPeriod], [TraceContext]
//     (job).
//
// # Guarantees
//
// At least once. A job whose runner dies, or whose result cannot be written,
// runs again: once its lease expires, or, if its runner is alive, at the
// runner's next lease renewal. Handlers must therefore make their effects
// idempotent, or commit them with something the next attempt checks: a job
// may finish its work and die before its completion is written. Chunked
// jobs get this from the engine: a failed attempt's output is cleaned up,
// and cleaned up again before the next attempt starts.
//
// Exactly one completion record. A job becomes COMPLETED once, by the claim
// that holds it; any other claim's result is refused, also that of an
// earlier claim whose attempt was given back.
//
// No job is lost and none is claimed twice at once: claims use row locks
// with SKIP LOCKED on PostgreSQL and the write lock on SQLite. This is
// tested with four runners on separate pools, with runner processes sharing
// thousands of jobs (each recording its work in a ledger inside its
// transaction), with the server restarted under a runner, with a runner
// process killed with SIGKILL mid-job, and with a runner cut off from the
// database by a network partition.
//
// A job that kills its process fails alone: it is FAILED after MaxAttempts
// attempts that count, and the jobs that died beside it lose no attempt
// (see Poison jobs).
//
// A stopped runner leaves nothing PROCESSING (see Shutting down).
//
// Bad input is refused at the door, with nothing created: an unknown kind
// ([ErrUnknownKind]), a payload that does not encode or decode into the
// kind's type ([ErrInvalidPayload]), an option out of range
// ([ErrInvalidOption]). A duplicate idempotency key returns the existing
// job, marked Duplicate.
//
// What is stored is what was given. PostgreSQL refuses a NUL byte or bytes
// that are not UTF-8 in text, and \u0000, an unpaired surrogate or a number
// beyond numeric in jsonb; encoding/json silently turns bytes that are not
// UTF-8 into U+FFFD. So every string a job stores is checked before any
// statement: strings anywhere in the payload (fields, map keys, slices,
// pointers, interfaces), what a type's own MarshalJSON or a json.RawMessage
// writes, and the auth claims are refused with ErrInvalidPayload; the queue
// name, idempotency key, correlation ID, run and period with
// ErrInvalidOption. Each error names the field (args.County,
// auth["role"], IdempotencyKey) and, in EnqueueMany and EnqueueBulk, the
// job. EnqueueRaw's JSON is checked as it will be stored. Kind, queue,
// schedule, rule and runner names, and the strings of a [Filter] or
// [ReviewQuery], are checked where they are given. A fuzz target holds
// Enqueue to this (go test -fuzz FuzzEnqueue ./queue/).
//
// An unmigrated schema says so: Runner.Start, and every Client call on a
// schema that Migrate has not brought up to date, return an error wrapping
// [ErrNotMigrated], with the database's own error in its chain.
//
// A paused queue is not claimed, by any runner, suspects included, from one
// poll interval after PauseQueue returns (at once on PostgreSQL, whose
// runners are notified), and is claimed again within one after
// ResumeQueue.
//
// Attempt history costs completions nothing: attempts that fail, are
// cancelled while running, or are rescued are recorded by the statements
// that end them; the attempt that completes is read from the job's row,
// which keeps the runner that completed it in LockedBy.
//
// Auth stays private: [Auth] prints and logs as [auth redacted].
//
// # Limits
//
//   - Priority orders jobs within a queue; a runner that works several
//     queues takes turns between them.
//   - A job enqueued with a run time in the past, behind a backlog a runner
//     is working through, may wait up to one poll interval longer than
//     strict order would make it (see Claiming).
//   - Jobs claimed ahead start in the order they were claimed: a
//     higher-priority job that arrives meanwhile starts after them (a
//     claim's time, typically; at most 100 ms, when they go back).
//   - A claim lost to a crash of the database server does not count its
//     attempt: claims commit without waiting for the disk, results with it.
//   - After a crash, the dead runner's jobs come back as suspects, which
//     each runner works one at a time: a runner killed while it held many
//     long jobs hands them back at that pace. Stop runners with Stop, which
//     puts jobs back as ordinary jobs.
//   - Suspects are isolated per runner, not per process: two runners in one
//     process share its fate, and a suspect in one may be charged an
//     attempt for a crash that the other's job caused.
//   - [Client.Stats] and [Client.Queues] read the whole table, and
//     Filter.Search every row the rest of the filter selects: fine for
//     dashboards, not for hot paths. On SQLite, Search ignores the case of
//     ASCII letters only.
//   - The attempt history keeps a job's last 20 attempts; an attempt put
//     back uncounted (by Stop, or claimed ahead and given back) is not
//     listed, and leaves a gap in the numbers.
//
// # Maintenance
//
// Some work must run once however many runners there are: the rescue of
// expired leases, and the upkeep that [MaintenanceTask]s do. The runners
// elect one of them, the leader, through a row in sheaf_leader, and only
// the leader runs that work: the rescue every [WithRescueInterval], then
// the client's own upkeep, then the tasks given to it with
// [WithMaintenance], each on its own goroutine at the cadence its rounds
// return, the first round as soon as it leads. [Client.Runners] marks it.
// The alerts of package queue/alert are such a task: an alert.Alerter
// given to every runner with WithMaintenance is run by the leader alone.
//
// The leadership is a lease: a runner's [WithLease], at most 30 s, from
// the database's clock (on SQLite, the machine's). A runner takes it when
// it is free or has expired, and its holder renews it every third of the
// lease. The leader stops its tasks, cancelling their contexts and waiting
// for them, two thirds of a lease after it sent the last renewal that
// succeeded, unless a later one has: a leader cut off from the database
// has stopped them before the lease can lapse and another runner take
// over. A task that returns within a third of the lease of its
// cancellation therefore never runs on two runners at once. A runner that
// stops gives the leadership up once its tasks have returned, and another
// runner takes over within a third of a lease; one that dies is replaced
// when its lease expires, about a lease after its last renewal (with the
// default lease, 30 s; tested with 1 s, in about 1 s).
//
// A runner given [WithoutMaintenance] never leads, for processes that
// must not do that work, such as a web server that runs a few jobs of its
// own. At least one runner on the database must campaign, or the jobs of
// runners that die stay PROCESSING.
//
// # Connections
//
// A runner keeps four connections for itself (claims, results, leases, and
// the listener), and its handlers take the rest as they need them, waiting
// for one when all are busy, as do the maintenance leader's election and
// tasks; NewRunner refuses a pool capped below four.
// Set the pool's open limit to what the server can spare for this process:
// PostgreSQL allows 100 connections in all by default, shared by every
// process, and refuses the 101st (SQLSTATE 53300). Set the idle limit to the
// same number: database/sql keeps only 2 idle connections by default, so
// under load it would close most connections as soon as a handler returns
// them and open new ones for the next.
//
//	sqlDB, _ := db.DB()
//	sqlDB.SetMaxOpenConns(20)
//	sqlDB.SetMaxIdleConns(20)
//
// Start warns when a pool with no open limit may open more connections
// than the server accepts; while it runs, the runner warns once if the pool
// closes ten or more connections a second because its idle list is full
// (DBStats.MaxIdleClosed), and says what to set. Handlers that write a single row each are faster with gorm's
// SkipDefaultTransaction, which saves a BEGIN and a COMMIT per insert.
//
// # Shutting down
//
// A program stops its runners when it is told to, and then exits:
//
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	...
//	// Start on a context the signal does not cancel: cancelling Start's
//	// context cuts running jobs short at once, with no grace period.
//	if err := runner.Start(context.WithoutCancel(ctx)); err != nil { ... }
//	<-ctx.Done() // or the program's own work, on ctx
//	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
//	defer cancel()
//	if err := runner.Stop(stopCtx); err != nil { ... }
//
// Stop claims nothing more and lets running jobs finish. A little before
// its deadline (a fifth of the time it was given, at least 100 ms, at most
// one bookkeeping statement's timeout: a 5 s deadline lets jobs run 4 s) it
// cancels the jobs still running (cause [ErrStopping]), puts them back in
// the queue with their attempt uncounted, writes the results of the jobs
// that finished, and returns an error wrapping [context.DeadlineExceeded]
// that says how many it cut short. A context cancelled without a deadline
// does the same at once. When Stop returns, nothing is left PROCESSING
// under that runner, so the program may exit.
//
// Stop does not wait for handlers that ignore their cancellation: their
// jobs go back all the same, and what those handlers do afterwards (their
// result, SetProgress, SetOutput, CompleteTx) is refused, though their own
// side effects are not, so a handler should return soon once its context
// is done. [Runner.Done] is closed when every handler has returned. Choose
// a grace period shorter than the orchestrator's kill timeout (30 s by
// default on Kubernetes). If the database cannot be reached, Stop returns
// an error saying that the jobs it could not put back are rescued when
// their leases expire. Stop is idempotent and safe without Start.
//
// A row that another transaction holds does not keep the other jobs from
// going back: they go back at once, and the held one when it is free, or,
// past the deadline, when its lease expires. Stop rolls back the open
// transaction of a handler it cuts short after [Job.CompleteTx]. On SQLite
// every transaction that has written holds the database, so a handler that
// keeps another open, ignoring its cancellation, keeps every job from going
// back: begin a handler's transactions with its context
// (db.WithContext(ctx)). A cut-short chunked job cleans up nothing; its
// next attempt does, before it starts.
//
// Start's context carries values to every job's context; cancelling it
// stops the runner at once, as Stop does at its deadline. So give
// Start a context that lives as long as the runner, and stop the runner
// with Stop.
//
// Start checks the database before it starts anything: it returns an error
// at once if the server does not answer, one wrapping ErrNotMigrated if the
// schema is missing or older than this sheaf, and one wrapping
// [ErrSchemaTooNew] if a newer sheaf has migrated it.
//
// # Running on SQLite
//
// The queue runs on an SQLite file too: for a first try, for tests, for a
// single binary that needs no server. Open the file with
// github.com/sheaf-dev/sheaf/queue/sqlitedb and hand it to NewClient as you
// would a PostgreSQL handle; everything else is the same. The driver is
// modernc.org/sqlite (SQLite translated to Go) under the pure-Go gorm
// dialector github.com/libtnb/sqlite: no cgo and no C compiler, so
// CGO_ENABLED=0 builds and cross-compiles work, and a first build compiles
// no C. sqlitedb.Open's pool keeps up to 128 idle connections, enough for a
// default runner's workers, and closes those idle for 5 minutes. What
// differs, because SQLite has one writer and no server:
//
//   - Writes take turns: within a process on one semaphore per file, across
//     processes in SQLite's busy handler. A claim is one UPDATE ...
//     RETURNING under the write lock, so no job is claimed twice.
//   - Runners in the process that wrote are woken at once; runners in other
//     processes on the same file find new jobs, and cancellations, when
//     they poll and renew their leases.
//   - Dependency release and schedule ticks are serialised by the write
//     lock, as PostgreSQL's advisory and row locks serialise them.
//   - Times are stored as UTC text in one fixed-width layout
//     (sqlitedb.TimeLayout), so that comparing text compares times; JSON
//     (payload, output) as bytes. Bind times in that layout when you query
//     the tables by hand.
//   - Refused with an error rather than pretended: an in-memory database
//     (it would be one per connection), a connection without a busy
//     timeout, a file that cannot switch to WAL.
//
// # Schedules
//
// A [Periodic] schedule creates jobs at each tick of its timetable, in its
// own time zone:
//
//	kolkata, _ := time.LoadLocation("Asia/Kolkata")
//	err := reg.Schedule(queue.Periodic{
//		Name:     "county-daily",
//		Spec:     queue.Daily(23, 0), // or Weekly, Monthly, Quarterly, Yearly, or queue.Cron("0 23 * * 1-5")
//		Location: kolkata,
//		Jobs: func(t queue.Tick) []queue.Params {
//			return []queue.Params{{Args: ReportArgs{County: "Travis"}}, {Args: ReportArgs{County: "Harris"}}}
//		},
//		Missed: queue.SkipMissed, // or queue.RunMissedOnce, queue.CatchUp(3)
//	})
//
// Every runner runs the registry's schedules, and a tick creates its jobs
// exactly once between them: the tick is claimed by moving the schedule's
// last tick under its row lock, in the same transaction as the jobs, and
// each job's idempotency key names the tick. A tick younger than the
// schedule's grace ([Periodic.Grace]; default a minute, or two poll
// intervals if longer) when a runner starts is due and fires, on the first
// start of a new schedule too: a schedule deployed at 23:00:05 fires 23:00.
// Older ticks that no runner fired are missed: the schedule's policy skips
// them ([SkipMissed], the default), runs the latest once ([RunMissedOnce]),
// or fires the n latest, oldest first ([CatchUp]); the rest are skipped.
//
// Every expected tick gets a row in the tick ledger, written in the
// transaction that creates its jobs or skips it: fired (within the grace),
// late (caught up, or fired after the database came back) or missed, with
// the time it was recorded, its run ID and its number of jobs. [Client.Ticks]
// lists it; [Client.ScheduleStates] and the review's MissedTicks read it, so
// "last tick" is a tick that fired, and a night skipped is named as such. A
// schedule's ledger rows older than 400 days are deleted as it fires; a
// removed schedule's rows stay until deleted by hand.
//
// A schedule replaced under the same name follows its new timetable from
// its next tick. Schedules can be added, replaced and removed while runners
// run ([Registry.Schedule], [Registry.Unschedule]). Each tick stamps its jobs with a run ID
// (county-daily@2025-12-08T23:00:00+05:30) and a period (the local date).
//
// Presets check their arguments: Daily(25, 0) is refused by
// Registry.Schedule with "Daily(25, 0): hour 25 not in [0, 23]". [Cron] takes
// any five-field expression, parsed by github.com/robfig/cron/v3; one that
// can never fire (0 0 30 2 *) is refused, and so is a time zone in the
// expression (set Location). Ticks keep their local wall-clock time across
// daylight-saving changes: a tick in the hour that repeats when clocks go
// back fires once (a schedule more frequent than hourly skips that hour's
// second pass), and a tick in the gap when they go forward is skipped, so
// schedule nightly work outside the change hours.
//
// A tick whose jobs cannot be built (its Jobs function or a job's
// MarshalJSON panics, or Enqueue would refuse a job) is skipped: it creates
// nothing, is logged at Error with the reason (and the stack, for a panic),
// and the schedule moves on to its next tick instead of failing the same way
// at every poll; the morning review lists it among the ticks that created
// nothing.
//
// # Batch windows
//
// A [Window] keeps a kind's jobs, or a whole queue's, from starting outside
// daily hours:
//
//	night, err := queue.DailyWindow("23:00", "05:00", kolkata) // crosses midnight
//	err = queue.Register(reg, heavyReport, queue.During(night)) // a kind
//	reg.QueueWindow("nightly", night)                           // or a whole queue (cheaper)
//
// Outside its window a job stays QUEUED and no runner claims it; a job that
// is running when the window closes finishes. Windows go by the runner's
// clock ([WithClock]).
//
// # Dependencies
//
// A [Rule] releases a child job when its parents complete:
//
//	// 1→1: every completed county report releases that county's summary.
//	err := queue.Depend(reg, queue.Rule{Name: "county-summary", Parents: []string{"county_report"}, Each: true},
//		func(parents []queue.JobRecord) (SummaryArgs, []queue.EnqueueOption) { ... })
//	// N→1: the consolidated report waits for the weekly and the monthly of the same period.
//	err = queue.Depend(reg, queue.Rule{Name: "consolidated", Parents: []string{"weekly", "monthly"}},
//		func(parents []queue.JobRecord) (ConsolidatedArgs, []queue.EnqueueOption) { ... })
//
// A child is released in the transaction that completes its last parent,
// under a lock per rule and period, so parents completing at the same
// instant on different runners release exactly one child. A failed or
// cancelled parent releases nothing; retried to success, it releases the
// child then. A rule whose child cannot be built (its function or the
// child's MarshalJSON panics, or Enqueue would refuse the child) lets the
// parent complete without the child, logged at Error; the review lists the
// chain as stopped with every parent complete. Cycles are refused when rules
// are registered. A child takes its parents' run and period, and reads them,
// and what they left with Job.SetOutput, through Job.Parents.
//
// # The morning review
//
// [Client.Review] says what a run (or a time range) did:
//
//	rv, err := client.Review(ctx, queue.ReviewQuery{RunID: "county-daily@2025-12-08T23:00:00+05:30"})
//	// rv.Counts by status; rv.Failed with errors and attempts; rv.Slow against each kind's
//	// median of its earlier runs; rv.NeverRan and why; rv.MissedTicks (ticks that created nothing);
//	// rv.Stopped: dependency chains that stopped, and the parent that stopped them.
//	n, err := client.RetryFailed(ctx, queue.Filter{RunID: rv.Query.RunID}) // the selective retry
//
// A review covers a run or a time range (From, To); a range also lists the
// schedule ticks in it that created no job.
//
// # Retention and history
//
// Finished jobs are deleted once they are old enough, so that a year of
// nightly runs does not grow the jobs table to tens of millions of rows:
// completed jobs after [DefaultKeepCompleted] (7 days: a nightly shop looks
// back about a week to see what ran), failed and cancelled ones after
// [DefaultKeepFailed] and [DefaultKeepCancelled] (30 days: what someone must
// look into outlasts a long weekend and a holiday). [WithRetention] changes
// these for the client, [Retain] for a kind; [KeepForever] keeps. A job is
// deleted with its recorded attempts and the audit entries that target it
// alone, and only once every job of its run and of its period may go too,
// so a dependant released later still finds its parents. Retention.Archive
// sees every batch before it is deleted, in the deleting transaction: if it
// fails, nothing of the batch is deleted (examples/archive writes gzipped
// JSON lines).
//
// Before they go, jobs are rolled up per UTC day, kind and queue: counts by
// outcome, retries, the median, 95th percentile and longest run time of the
// completed ones, and failures by the shape of their error. A day's
// roll-up becomes final five minutes after the day ends, and jobs are
// deleted only from final days. Roll-ups are kept [DefaultKeepHistory] (a
// year, a few rows per kind a day). [Client.History] reads them, and the
// days not final yet from the jobs themselves; the morning review compares
// a night with them once the earlier jobs are pruned, and the console charts
// them (GET /api/history).
//
// The work is upkeep on one elected runner: roll-ups every 10 minutes,
// pruning in batches of 1,000 jobs, each its own transaction of a few
// milliseconds, with a pause between batches, so runners never wait on it
// for long.
//
// # Telemetry
//
// Package github.com/sheaf-dev/sheaf/queue/otelqueue reports the queue to
// OpenTelemetry through [WithHooks], as one option given to the client.
// Without it the queue does no telemetry work and imports no OpenTelemetry.
//
// # Tables
//
// The queue owns these tables, in the schema (PostgreSQL) or file (SQLite)
// it is given; Migrate creates them:
//
//   - sheaf_jobs: every job, one row each: kind, queue, status, priority,
//     payload, attempts and claims, lease, times, progress, last error,
//     auth, run, period, parents, output and trace context.
//   - sheaf_schedules: one row per schedule, its last tick whose jobs were
//     created and when a runner first started it; locking it claims a tick.
//   - sheaf_ticks: the tick ledger, one row per expected tick of a schedule
//     (fired, late or missed), kept 400 days ([Client.Ticks]).
//   - sheaf_queues: queues paused by hand (a resumed queue keeps its row).
//   - sheaf_attempts: the last 20 attempts of each job that did not
//     complete (retried, failed, cancelled while running, rescued), with
//     runner, times, outcome and error.
//   - sheaf_runners: the runners that are up, with their queues and
//     workers; each writes its row as it starts and at every lease renewal,
//     and deletes it as it stops.
//   - sheaf_audit: what operators did, as an application records it
//     ([Client.RecordAudit]).
//   - sheaf_leader: the runner that leads the maintenance, and until when
//     its leadership lasts unless renewed.
//   - sheaf_history: the day roll-ups of finished jobs, one row per UTC
//     day, kind and queue; sheaf_rollup: the first day not yet final.
//   - sheaf_alert_episodes, sheaf_alert_notices, sheaf_alert_silences:
//     the state of package queue/alert (what fired and resolved, the
//     notifications owed to its sinks, silences); empty without it.
//   - sheaf_runs: one row per run, added with its first job; once every
//     job of the run has finished, the maintenance leader keeps its counts
//     by status there, so [Client.Runs] reads a page of runs rather than
//     every job, and a run stays listed after its jobs are pruned.
//   - sheaf_migrations: the schema versions applied.
//
// # Upgrading the schema
//
// The schema has a version, [SchemaVersion]. To upgrade, run the new
// release's [Client.Migrate], then replace the processes. Migrate is
// idempotent and holds a lock while it works (an advisory lock on
// PostgreSQL, the write lock on SQLite), so processes that migrate at once
// run one after the other and the later ones find nothing to do. It logs a
// warning naming the runners that were up (seen in the last minute) as it
// upgraded the schema: they run an earlier release and must be replaced. A
// runner of this release refuses to start on an older schema
// (ErrNotMigrated), and Migrate and Start refuse a newer one
// (ErrSchemaTooNew). Teams that apply schema changes with their own tool
// (goose, golang-migrate, atlas) take the SQL from [Client.Migrations]:
// applied in order, each in a transaction, they give the schema Migrate
// gives. Migrations only go forward.
//
// Migrate refuses a schema that was partly dropped by hand (some of the
// tables above missing, or tables left with no version recorded) with
// [ErrPartialSchema], naming the tables found and missing and the way out:
// restore what was dropped, or drop the queue's remaining tables and
// migrate afresh.
//
// The queue's own statements are not written to your gorm logger: they are
// batches of up to thousands of IDs, and their errors are returned to you.
// Your statements on the same handle, or in a transaction given to
// [Client.Tx], are logged as before.
//
// From schema version 7 on, a process that is already running keeps working
// through a migration that adds a column: every statement names the columns
// it reads, and a runner tries a write again when PostgreSQL says a
// statement it had prepared changed its result ("cached plan must not
// change result type", SQLSTATE 0A000). From version 6, stop the runners
// first: version 6 read whole jobs with *, so on PostgreSQL each of its
// statements that does fails once per connection after the migration. A
// client call then returns that error and works when tried again; but a
// runner does not retry it, and a completion that releases dependency
// children is dropped and runs again once its lease is out. A version-6
// runner also does not see the trace context of jobs that version 7
// enqueued.
package queue
