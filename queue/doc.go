// Package queue is a job queue on PostgreSQL, SQLite or MariaDB, through
// gorm: jobs are rows, claimed atomically by any number of runners in any
// number of processes, retried with backoff, rescued when their runner dies,
// and finished with exactly one completion record. Long jobs can run chunk
// by chunk on sheaf's batch engine, with progress, cancellation and
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
// db is a *gorm.DB: opened with gorm's PostgreSQL driver (pgx), on an
// SQLite file with package github.com/sheaf-dev/sheaf/queue/sqlitedb, or on
// MariaDB with package github.com/sheaf-dev/sheaf/queue/mysqldb.
//
// [Client.Tx] returns a [TxClient] whose every call runs in a transaction
// of yours: a job exists if and only if your own writes commit, and
// runners hear of it at the commit (on SQLite and MariaDB, those of other
// processes at their next poll). [Client.EnqueueMany] and
// [Client.EnqueueBulk] enqueue many at once.
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
//     backoff); its lease expired (rescue); or, uncounted, the runner
//     stopped before it finished, it waited too long for a worker after a
//     claim ahead, or the runner found it held in its name but not running.
//   - PROCESSING → FAILED: the last attempt failed, the error was
//     [Permanent], or a suspect's lease expired on its last attempt. This is
//     the dead letter, kept with its error.
//   - PROCESSING → CANCELLED: Cancel; the handler's context is cancelled
//     with cause [ErrCancelled].
//   - FAILED or CANCELLED → QUEUED: [Client.Retry], or [Client.RetryFailed]
//     for every failed job a filter selects.
//
// On PostgreSQL and MariaDB every time (created, started, completed, run
// times, backoffs, leases) is the server's; on SQLite, which runs inside
// the program, the program's clock.
//
// # How a runner works
//
// A runner's parts each own their goroutines: the claim loop, the workers,
// the completer, the lease renewer, the maintenance leader (see
// Maintenance), the listener and the schedule loop. [Runner.Stop] stops them
// in order (claims first; the lease keepers and the completer once the
// workers have run what was claimed), so no goroutine outlives [Runner.Done].
//
// One statement claims as many due jobs as the runner has room for (see
// [WithWorkers]), highest priority first, then earliest run time, then
// lowest ID, within each queue it works: on PostgreSQL with FOR UPDATE SKIP
// LOCKED through a partial index in that order (on MariaDB with SKIP LOCKED
// too), on SQLite under the write lock. Through a backlog, a claim continues
// where the last stopped; the runner rescans at the end, when notified of a
// job of higher priority, and at least every poll interval. On PostgreSQL a
// NOTIFY per enqueue statement and queue, scoped to the schema, wakes an
// idle runner within milliseconds.
//
// A claimed job is leased to its runner ([WithLease]), which renews the
// leases on a connection of its own, retrying a failed renewal promptly: a
// lease is lost only when the runner cannot reach the database for about the
// lease's length. The jobs of a runner that dies, freezes or is cut off are
// rescued by the maintenance leader once their leases expire; the job's last
// error names the runner that lost it and the one that rescued it.
//
// Results are written in batches, each guarded by the job and its claim: a
// result that arrives after the job was rescued or cancelled changes nothing
// ([EventRejected]). The runner's statements run on contexts that a job's
// cancellation does not cancel, each bounded by a sixth of the lease, between
// 1 s and 10 s; one that fails with an error that can pass (a broken
// connection, a timeout, a server restarting, a serialisation failure) is
// retried with growing pauses while the job's lease is renewed.
//
// # Poison jobs
//
// A process that dies takes every job it was running with it, and does not
// say which of them killed it. So the first rescue of a job gives its
// attempt back and makes it a suspect (JobRecord.Rescues). Each runner runs
// one suspect at a time, beside its ordinary jobs, and counts its attempt
// as it starts. A suspect that kills its process again has used an
// attempt, and after MaxAttempts of them it is FAILED; the jobs that died
// beside it run again and complete. A suspect whose attempt finishes, well
// or badly, is an ordinary job again.
//
// # Handlers, retries and dead letters
//
// A handler returns nil to complete the job. Any other error retries it
// after the kind's or the job's backoff ([RetryBackoff]): [Exponential]
// (the default: 1 s doubling to 5 min, ±10%), [Linear], [Delays] (fixed
// steps) or, for a kind, any [Backoff]. [Permanent] fails the job at once,
// and so does a payload that no longer decodes. A panic or a
// runtime.Goexit is a failed attempt (a kind's Backoff that panics gets the
// default's delay); so is one that outlives the kind's [Timeout] (cause
// [ErrTimeout]). The last failure leaves the job FAILED with its error:
// list such jobs with [Client.List], react to them with an observer
// ([EventFailed]), and put them back with Retry or RetryFailed.
//
// Chunked jobs run on the batch engine ([RegisterChunked], [Chunked],
// [Pages]): one chunk per call, with the job's progress and its
// [ChunkTimes] saved after each, and Cleanup removing a failed attempt's
// output.
//
// # Exactly-once effects: completing in the handler's transaction
//
// A handler whose effects are rows in the queue's database writes them and
// calls [Job.CompleteTx] in the same transaction, just before the commit:
// the job is COMPLETED if and only if the rows commit, and a process that
// dies before the commit leaves neither (the job runs again after its
// lease). Enqueue follow-up jobs in it with Client.Tx(tx). Effects outside
// the database (HTTP calls, files, messages) cannot share it: they are at
// least once.
//
// # Operating the queue
//
// [Client.PauseQueue] and [Client.ResumeQueue] stop and resume the claiming
// of a queue's jobs, by every runner; [Client.Queues] counts each queue's
// jobs by status; [Client.Attempts] lists a job's last 20 attempts;
// [Client.CancelMatching] cancels every queued and running job a [Filter]
// selects; [Client.Runners] lists the runners seen lately; and
// [Client.RecordAudit] and [Client.AuditLog] keep an application's record of
// what its operators did. Package github.com/sheaf-dev/sheaf/queue/console
// serves all of this over HTTP, with a dashboard; the command
// github.com/sheaf-dev/sheaf/queue/cmd/sheaf does it from the shell, and
// migrates, reviews, serves the console and benchmarks.
//
// # Concurrency and rate limits
//
// A [Limit] caps the jobs of a kind, a queue or each partition key of a
// kind ("two reports at once per customer") across every runner and
// process, by how many run at once, how many start in a span, or both.
// Declare a kind's at registration ([KindLimit], [KeyLimit]):
//
//	queue.Register(reg, h, queue.KeyLimit(func(a Report) string { return a.Customer },
//		queue.Limits{Concurrency: 2, Rate: 100, Per: time.Minute}))
//
// or set any at run time with [Client.SetLimit]; [Client.Limits] lists
// them with their use.
//
// Limits hold in the claim itself, on every store (on MariaDB in the claim's
// transaction, see package mysqldb): a runner never claims what a limit
// forbids, and the jobs a limit holds back are passed over for those behind
// them, by priority as ever. A scope's use is the count of its PROCESSING
// jobs, so the slots of a dead runner come back when its jobs are rescued,
// within a lease; the rate counts the starts of the last Per, recorded by
// the claims. Claims that a limit may touch take turns (on PostgreSQL, under
// a lock of the limits' rows, taken in the claim's round trip) so that two
// runners cannot both take the last slot; claims of queues no limit touches
// run as they would without limits, and runners read the limits with the
// paused queues, at no cost. A kind or key limit may touch every queue, so
// claims take turns wherever one is in force. A binding limit leaves each
// slot idle between one job's completion and the next one's claim: the
// completion's commit, then the claim's, two or three milliseconds on a
// loaded machine, which jobs of a second or more do not notice. A runner
// whose workers are at least a concurrency limit claims the slots its
// completions free as soon as they commit. Measured on PostgreSQL on a
// two-core machine, two runners of 4 workers under a limit of 4 used 96.5
// to 97.2% of it with jobs of 200 ms, and 80.6 to 81.8% with jobs of
// 20 ms (`go test -run '^$' -bench LimitUtilisation -benchtime 3000x
// -count 3 ./queue/`); a limit that never binds ran 0.76 to 0.92 times as
// many no-op jobs a second as none, median 0.89 of five runs, none 9,500
// to 12,300 a second (`go test -run '^$' -bench LimitCost -benchtime 3000x
// -count 5 ./queue/`; on SQLite a median of 0.82 of none's 19,000 to
// 20,000, on MariaDB 0.80 of 13,000 to 15,000, whose limited claim sends
// three batches of statements to a claim's two): a limited claim counts
// the scope's running jobs, and takes its turn under the limits' lock.
//
// # Fair share
//
// With Fair, a key limit makes claims take turns among the kind's keys,
// capped or not (Limits{Fair: true} caps nothing): a claim takes first the
// jobs of the keys with the fewest running, by priority within a key, so
// one customer's 100,000 jobs cannot hold back another's ten. Once a key's
// first job is claimed, its n jobs are all claimed before another key has
// had n more, plus one claim's worth (up to twice the runner's workers
// from a nearby server, more behind a far one). A fair claim probes an
// index once per key with jobs waiting (on MariaDB it reads the fair kinds'
// queued jobs); other claims do not.
//
// Weights give some keys more turns: under Limits{Fair: true, Weights:
// map[string]int{"acme": 3}}, while keys have jobs waiting, acme has three
// jobs claimed to another key's one, and as jobs finish, three running to
// its one; a key not in Weights weighs 1 (a weight is from 1 to 1,000).
// A fair claim hands its jobs to the workers in its turns. Bound: of the
// first 4n jobs whose handlers began, of a key of weight 3 and one of
// weight 1, the second has n, within half the runner's workers; on SQLite
// and MariaDB within all of them
// (TestWeightedFairShare, 8 workers, n = 60, eleven runs on each store
// at a load average of 10 to 20: 57 to 61 on PostgreSQL, 54 to 59 on
// SQLite and MariaDB).
//
// # Options
//
// Options are typed by where they go, so one given where it does not apply
// does not compile: [ClientOption] (NewClient), [RunnerOption] (NewRunner),
// [RegisterOption] (Register), [ChunkedOption] (RegisterChunked),
// [EnqueueOption] (Enqueue, EnqueueRaw, [Params]). An [InstrumentOption] or
// a [ClockOption] is good for a client and a runner, a [JobOption] for a
// kind and a job. Each option's documentation gives its default and range.
//
// # Guarantees
//
// At least once. A job whose runner dies, or whose result cannot be written,
// runs again: once its lease expires, or, if its runner is alive, at the
// runner's next lease renewal. A job may finish its work and die before its
// completion is written, so handlers must make their effects idempotent, or
// commit them with something the next attempt checks (as Job.CompleteTx
// and chunked jobs' Cleanup do).
//
// Exactly one completion record. A job becomes COMPLETED once, by the claim
// that holds it; any other claim's result is refused, also that of an
// earlier claim whose attempt was given back.
//
// No job is lost and none is claimed twice at once: claims use row locks
// with SKIP LOCKED on PostgreSQL and MariaDB, the write lock on SQLite.
// Tests hold this with runners on separate pools and in separate
// processes, the server restarted under a runner, a runner killed with
// SIGKILL mid-job, and a runner cut off from the database by a network
// partition.
//
// Bad input is refused at the door, with nothing created: an unknown kind
// ([ErrUnknownKind]), a payload that does not encode or decode into the
// kind's type ([ErrInvalidPayload]), an option out of range
// ([ErrInvalidOption]). A duplicate idempotency key returns the existing
// job, marked Duplicate; EnqueueRawKeyed, for a consumer of a broker's
// messages that needs only to know they are stored, returns only which
// jobs were duplicates, and reads no job back.
//
// What is stored is what was given. PostgreSQL refuses NUL bytes and bytes
// that are not UTF-8 in text, and \u0000, unpaired surrogates and numbers
// beyond numeric in jsonb; encoding/json silently turns bytes that are not
// UTF-8 into U+FFFD. So every string a job stores (payload, auth claims,
// options) is checked before any statement, with ErrInvalidPayload or
// ErrInvalidOption naming the field (args.County, auth["role"],
// IdempotencyKey) and, in EnqueueMany and EnqueueBulk, the job; names and
// the strings of a [Filter] or [ReviewQuery] where they are given.
//
// An unmigrated schema says so: Runner.Start, and every Client call on a
// schema that Migrate has not brought up to date, return an error wrapping
// [ErrNotMigrated], with the database's own error in its chain.
//
// Auth stays private: [Auth] prints and logs as [auth redacted].
//
// # Limits
//
//   - Priority orders jobs within a queue; a runner that works several
//     queues takes turns between them.
//   - A job enqueued with a run time in the past, behind a backlog a runner
//     is working through, may wait up to one poll interval longer than
//     strict order would make it (see How a runner works).
//   - Jobs claimed ahead start in the order they were claimed: a
//     higher-priority job that arrives meanwhile starts after them (a
//     claim's time, typically; at most 100 ms plus two claims' time, when
//     they go back).
//   - A claim lost to a crash of the database server does not count its
//     attempt: claims commit without waiting for the disk, results with it.
//   - After a crash, the dead runner's jobs come back as suspects, which
//     each runner works one at a time. Stop runners with Stop, which puts
//     jobs back as ordinary jobs.
//   - Suspects are isolated per runner, not per process: two runners in one
//     process share its fate, and a suspect in one may be charged an
//     attempt for a crash that the other's job caused.
//   - Filter.Search reads the whole table: fine for dashboards, not for
//     hot paths ([Client.Stats] and [Client.Queues] read the day and hour
//     roll-ups for the finished jobs).
//
// # Connections
//
// A runner keeps four connections for itself (claims, results, leases, and
// the listener); its handlers, and the maintenance leader, take the rest as
// they need them. NewRunner refuses a pool capped below four. Set the pool's
// open limit to what the server can spare for this process (PostgreSQL allows
// 100 connections in all by default) and the idle limit to the same number,
// or database/sql, which keeps 2 idle by default, closes and reopens
// connections under load:
//
//	sqlDB, _ := db.DB()
//	sqlDB.SetMaxOpenConns(20)
//	sqlDB.SetMaxIdleConns(20)
//
// A runner warns, saying what to set, when a pool without an open limit may
// open more connections than the server accepts, and when its idle list
// closes ten or more connections a second. Handlers that write a single row
// each are faster with gorm's SkipDefaultTransaction.
//
// # Shutting down
//
// A program stops its runners when it is told to, with [Runner.Stop] and a
// grace period shorter than the orchestrator's kill timeout (30 s by
// default on Kubernetes), and exits when Stop returns: by then no job is
// left PROCESSING under the runner (see Stop and its example). Give
// [Runner.Start] a context that lives as long as the runner
// (context.WithoutCancel of a signal's context).
//
// # Running on SQLite and MariaDB
//
// Open an SQLite file with github.com/sheaf-dev/sheaf/queue/sqlitedb, or
// MariaDB 10.11 with github.com/sheaf-dev/sheaf/queue/mysqldb (both pure
// Go), and hand it to NewClient as you would a PostgreSQL handle. Each
// package's documentation says what differs there.
//
// # Schedules
//
// A [Periodic] schedule creates jobs at each tick of its timetable, in its
// own time zone (see Registry.Schedule's example):
//
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
// exactly once between them: it is claimed under the schedule's row lock,
// in the transaction that creates its jobs, whose idempotency keys name
// the tick. Missed ticks follow the schedule's [MissedPolicy]; every
// expected tick gets a row in the tick ledger ([Client.Ticks]), so
// [Client.ScheduleStates] and the review name a skipped night.
// Registry.Schedule refuses a [Cron] expression that never fires
// (0 0 30 2 *). A tick whose jobs cannot be built (a panic in Jobs or a
// MarshalJSON, or a job Enqueue would refuse) creates nothing, is logged
// at Error, and the schedule moves on to its next tick; the review lists
// it among the ticks that created nothing.
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
// A [Rule], registered with [Depend], releases a child job when its
// parents complete, once, in the transaction that completes the last of
// them, under a lock per rule and period. A rule whose child cannot be
// built (its function or the child's MarshalJSON panics, or Enqueue would
// refuse the child) lets the parent complete without the child, logged at
// Error; the review lists the chain as stopped with every parent complete.
//
// # The morning review
//
// [Client.Review] says what a run, a period or a time range did: counts,
// failures grouped by the shape of their error, slow jobs against each
// kind's baseline of earlier runs ([Baseline]), jobs that never ran, ticks
// that created nothing and stopped chains (see [Review]), in a few
// aggregate statements however large the night; a finished run's counts
// by kind and status are read from what the leader kept of it once its
// last job finished, not from its jobs, and so are its slow jobs: the
// leader reviews each run as it keeps its counts, and the review keeps the
// slow jobs it found beside them (a review with other thresholds, or of a
// run that has changed since, finds them again, and keeps them too).
// [Client.RetryFailed] with the run's Filter is the selective retry.
//
// # Maintenance
//
// Work that must run once however many runners there are runs on one of
// them, elected through a row in sheaf_leader: the rescue of expired
// leases (every [WithRescueInterval]), the counts of finished runs, the
// roll-ups and pruning (see Retention and history), and the tasks given
// with [WithMaintenance], such as package queue/alert's alerter.
// [Client.Runners] marks the leader.
//
// The leadership is a lease of a runner's [WithLease] (at most 30 s),
// renewed every third of it. A leader cut off from the database stops its
// tasks before another can take over, so a task that returns within a third
// of a lease of its cancellation never runs on two runners at once. A runner
// that stops hands the leadership over at once; one that dies is replaced
// when its lease expires. A runner given [WithoutMaintenance] never leads;
// at least one runner must, or nothing is rescued.
//
// # Retention and history
//
// Finished jobs are deleted once old enough, so a year of nightly runs does
// not grow the jobs table to tens of millions of rows: completed jobs after
// [DefaultKeepCompleted], failed and cancelled ones after
// [DefaultKeepFailed] and [DefaultKeepCancelled]; [WithRetention] and
// [Retain] change that, and [Retention] says what goes with a job and when
// (examples/archive archives each batch before it goes).
//
// Before they go, jobs are rolled up per UTC day, kind and queue
// ([Client.History], [DayStats]), and per hour, per kind and queue, per
// queue and in all ([Client.Activity] by the hour), so the review and the
// console's charts read the same before and after pruning. The leader rolls
// up every 10 minutes (an hour is final 5 to 15 minutes after it ends, each
// day or hour in the transaction that records it final, so a crash neither
// counts one twice nor skips one), and prunes only jobs whose day and hour
// are final, in batches of 1,000 jobs, each a short transaction, with a
// pause after each of three times the batch's time (50 ms at least), so
// that the pruning leaves the server to the runners three quarters of the
// time however slow it is. A final day or hour is not counted again: a job that
// failed in it and was retried by hand later stays a failure there, and its
// new outcome counts in the day or hour it finishes again. The alert state
// of package queue/alert goes the same way (Retention.Alerts).
//
// # Telemetry
//
// Package github.com/sheaf-dev/sheaf/queue/otelqueue reports the queue to
// OpenTelemetry through [WithHooks], as one option given to the client.
// Without it the queue does no telemetry work and imports no OpenTelemetry.
//
// # Testing
//
// Package github.com/sheaf-dev/sheaf/queue/queuetest runs a handler
// against a Job built in memory, checks what code enqueued, works enqueued
// jobs within a test, and has a simulated [Clock]. A Job built by hand
// without it works too: its SetProgress, SetOutput and CompleteTx do
// nothing.
//
// # Tables
//
// The queue owns these tables, in the schema (PostgreSQL), database
// (MariaDB) or file (SQLite) it is given; Migrate creates them:
//
//   - sheaf_jobs: every job, one row each ([JobRecord]). On PostgreSQL
//     it is vacuumed after 1,000 changes plus 0.5% of its rows, each
//     vacuum cleaning its indexes: a claimed job leaves a dead entry at
//     the head of the claim index, which every claim walks until a vacuum
//     removes it. A table kept forever at a hundred million jobs pays for
//     that in reads of every index; there, ALTER TABLE sheaf_jobs SET
//     (vacuum_index_cleanup = auto) lets PostgreSQL skip the indexes when
//     few pages changed.
//   - sheaf_schedules: each schedule's last tick whose jobs were created;
//     locking its row claims a tick.
//   - sheaf_ticks: the tick ledger, kept 400 days ([Client.Ticks]).
//   - sheaf_queues: queues paused by hand (a resumed queue keeps its row).
//   - sheaf_attempts: the last 20 attempts of each job that did not
//     complete ([Client.Attempts]).
//   - sheaf_runners: the runners that are up ([Client.Runners]).
//   - sheaf_audit: the audit log ([Client.RecordAudit]).
//   - sheaf_runs: one row per run; the leader keeps a finished run's
//     counts and finish there, so [Client.Runs] reads a page, not every
//     job, and a run outlives its pruned jobs; a finished run's review
//     keeps its slow jobs there.
//   - sheaf_leader: the maintenance leader and its lease.
//   - sheaf_history, sheaf_rollup: the day roll-ups, and the first day not
//     yet final.
//   - sheaf_hours, sheaf_hours_final: the hour roll-ups, and the hours
//     kept and final.
//   - sheaf_alert_episodes, sheaf_alert_notices, sheaf_alert_silences: the
//     state of package queue/alert; empty without it.
//   - sheaf_limits, sheaf_limit_starts, sheaf_limit_weights: the limits
//     ([Client.Limits]), the starts of the rate-limited ones within their
//     period, the weights of fair share's keys, and on PostgreSQL the
//     functions that claim within them.
//   - sheaf_migrations: the schema versions applied.
//
// # Upgrading the schema
//
// The schema has a version, [SchemaVersion]. To upgrade, run the new
// release's [Client.Migrate], then replace the processes. Migrate is
// idempotent and holds a lock while it works (an advisory lock named after
// the schema on PostgreSQL, a named lock on MariaDB, the write lock on
// SQLite), so processes that migrate the same queue at once run one after
// the other, while queues in other schemas migrate beside it. It logs a
// warning naming the runners of an earlier release that were up (seen in
// the last minute): they must be replaced. A runner refuses to start on an older
// schema (ErrNotMigrated), and Migrate and Start refuse a newer one
// (ErrSchemaTooNew). Teams that apply schema changes with their own tool
// (goose, golang-migrate, atlas) take the SQL from [Client.Migrations].
// Migrations only go forward. Migrate refuses a schema that was partly
// dropped by hand with [ErrPartialSchema], which names the way out.
//
// The queue's own statements are not written to your gorm logger (they are
// batches of up to thousands of IDs, and their errors are returned to you);
// yours on the same handle, or in a transaction given to [Client.Tx], are.
//
// From schema version 7 on, running processes keep working through a
// migration that adds a column. Stop runners of version 6 first: they read
// whole jobs with *, and on PostgreSQL such statements fail once per
// connection after the migration.
//
// # Breaking changes
//
// What changed incompatibly in this release:
//
//   - Options are typed by where they apply; one given elsewhere no longer
//     compiles. [NewClient] takes [ClientOption]s, [NewRunner]
//     [RunnerOption]s, [Register] [RegisterOption]s, [RegisterChunked]
//     [ChunkedOption]s; [Client.Enqueue], [Client.EnqueueRaw],
//     Params.Options and a rule's child [EnqueueOption]s. Option is gone.
//     [OnQueue], [Priority], [MaxAttempts] and [RetryBackoff] return a
//     [JobOption] (kind or job); [WithLogger], [WithObserver], [WithHooks]
//     and otelqueue's Telemetry.Option an [InstrumentOption], and
//     [WithClock] a [ClockOption] (client or runner).
//   - The backoff option Retry(b) is [RetryBackoff](b). [DefaultBackoff]
//     and [Statuses] are functions; [SystemClock] is a type.
//   - [Client.Tx] returns a [*TxClient], whose every call, PauseQueue,
//     Stats, AuditLog and the review's included, runs in the transaction;
//     it has no Migrate, Wait, Ping, Runners, SchemaVersion, Activity or
//     Prune, and [NewRunner] does not take it.
//   - [Runner.Stop] out of time puts unfinished jobs back before it returns
//     without waiting for their handlers, and refuses their late results.
//   - Package queue/sqlitedb needs no cgo: github.com/mattn/go-sqlite3 is
//     out of the build. Its pool keeps up to 128 idle connections.
//   - Finished jobs are deleted by default: completed after 7 days, failed
//     and cancelled after 30 ([WithRetention], [Retain], [KeepForever]).
//   - Expired leases are rescued by the elected maintenance leader only; a
//     runner given [WithoutMaintenance] never rescues.
//   - The review's lists stop at ReviewQuery.Limit (MoreFailed and the
//     like count the rest); [Client.Stats] and [Client.Queues] count
//     finished jobs from the day roll-ups, pruned ones included.
//   - A new schedule's first start fires a tick younger than its grace
//     (Periodic.Grace), as every later start does.
package queue
