// Package queuetest helps test code built on package queue: handlers,
// the code that enqueues jobs, and schedules.
//
// # A handler's unit test
//
// NewAttempt builds a *queue.Job in memory and runs a handler against it
// on the test's goroutine, with no database: what the handler does through
// the job (SetProgress, SetOutput, CompleteTx) is recorded, Job.Parents
// returns the records the test gives, and the handler's context ends as a
// runner's would, when the test calls Cancel (cause queue.ErrCancelled) or
// the attempt's Timeout passes (cause queue.ErrTimeout).
//
//	a := queuetest.NewAttempt(ReportArgs{County: "Travis"})
//	a.Job.Auth = queue.Auth{"role": "SUPERVISOR"}
//	err := a.Run(ctx, handler)
//	processed, total := a.Progress()
//
// # What code enqueued
//
// RequireEnqueued fails the test unless the queue holds exactly one job of
// the given args, with the options a Want describes (queue, priority,
// attempts, run time, idempotency key, ...). Given a transaction's
// TxClient, it sees the jobs enqueued in that transaction before it
// commits. ListEnqueued returns a kind's jobs with their args decoded.
//
// # Working jobs in a test
//
// WorkDue works every due job on the calling test's database and returns
// once nothing more is due, with what the runner did: a test enqueues,
// calls WorkDue, and asserts on the outcome, without starting a runner or
// waiting for one.
//
// # Schedules and windows
//
// Clock is a simulated clock for queue.WithClock that stands still until
// the test moves it, and says when runners are waiting on it, so a test
// of a 23:00 schedule sets the clock to 23:00 once the runner has started
// and finds the tick's jobs.
//
// Package queue's own tests use other helpers; this package is for its
// users, and its API is kept small.
package queuetest
