// Package runner is the job logic of a queue.Runner: it claims jobs, runs
// their handlers, writes their results, keeps their leases and, while it
// leads the maintenance (package maintain), rescues the jobs of runners
// that died. Package queue's Runner is a facade over
// it: NewRunner turns the options and the registry into a Config, and
// Start, Stop, Done and Stats delegate. Every statement it issues is in
// package store; the goroutines of its parts are package run's.
//
// # Seams
//
// This package cannot import package queue, which imports it. What it
// needs from there comes in through Config, as small interfaces and
// callbacks rather than types moved down:
//
//   - Kinds: the registry's kinds and windows. Lookup returns a Kind, whose
//     Work decodes the payload into the user's type and runs the handler.
//   - Rules: the dependency rules. The runner completes a parent and
//     inserts its children in one transaction; Child builds a child with
//     the client's enqueue checks.
//   - Observe and Attempt: the observers and the hooks.
//   - Scheduler: the schedule loop, a Scheduler built by package queue,
//     started and stopped with the runner.
//   - Campaign and Upkeep: whether the runner campaigns for the
//     maintenance's leadership, and the tasks (the client's and the
//     user's) its maintain.Leader runs after the rescue while it leads.
//   - Preflight: the schema check Start runs first.
//   - Errors: the sentinels it hands out as causes and results.
//
// It reports a job as a Row and an Event, which package queue turns into a
// JobRecord and an Event of its own. A handler's Job reaches the attempt
// that runs it through the exported methods of Execution (SetProgress,
// SetOutput, CompleteTx), never through the runner's fields; a chunked handler runs
// through RunChunked.
//
// # Files
//
//   - runner.go: Runner, New (which builds the maintain.Leader), Start,
//     Stop and supervise (the parts' order of start and stop; the leader
//     stops first, so that another runner takes over the maintenance), Stats, and requeue (jobs put back,
//     uncounted, when the runner stops out of time).
//   - fetch.go: the claim loop (run.Poller's Fetch): free slots and the
//     claim-ahead, cursors, suspects, paused queues and closed windows.
//   - execute.go: Execution, one attempt of one job; launch (claims to
//     the workers), execute (a worker runs the handler), finish (the
//     attempt's result or its release), and the Attempt hook calls.
//   - complete.go: the completer's flush: results written many per
//     statement, parents completed with their children (Rules), and what
//     each result reports.
//   - completetx.go: Execution.CompleteTx, a completion in the handler's
//     own transaction, and how finish settles it once the handler returns.
//   - release.go: a parent's completion and the release of its children
//     (Rules), in one transaction, and the keys that name them (ChildKey).
//   - lease.go: the renewer's renew (and orphans put back), the runner's
//     row, and rescue of expired leases (rescuer, the leader's first
//     task).
//   - listen.go: notifications of new jobs, paused queues and
//     cancellations.
//   - chunked.go: RunChunked, the attempt of a chunked job on the batch
//     engine: progress after every chunk, cleanup of a failed attempt.
//   - schedule.go: Scheduler, the part that fires the registry's
//     schedules (generic over package queue's schedule type, which it
//     hands back to SchedulerConfig.Create to build a tick's jobs), and
//     Timing, when a schedule fires (and which ticks a review expects).
//   - bookkeeping.go: timeouts and retries of the runner's own statements.
//   - pool.go: what the connection pool needs for the runner (Conns,
//     PoolAdvice).
//   - config.go, event.go: what package queue hands in and gets back.
//
// # A job's way
//
// The poller calls fetcher.fetch when woken (a notification, a retry
// falling due, a slot freed) or at each poll. claimAll asks the store for
// as many due jobs as there are free slots, per queue in turn, holding
// Runner.claiming so the lease keeper never mistakes a claim in flight for
// jobs nobody runs; claimAndLaunch turns them into Rows and launch puts
// each, as an Execution, in running and held and hands it to the pool.
// A worker calls execute: it looks up the Kind, runs the Attempt hook and
// the handler (panics and runtime.Goexit become errors), and finish turns
// the outcome into a result for the completer, unless the job was
// cancelled, lost its lease, or is being put back by a stopping runner.
// The completer's flush writes the results (COMPLETED, QUEUED with a
// backoff, or FAILED), guarded by the claim's key so that a result from a
// claim the job has moved past changes nothing, and report counts and
// observes each. Until then renew keeps the lease of every held claim;
// once the result is written unhold drops it.
package runner
