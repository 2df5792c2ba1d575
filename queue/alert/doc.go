// Package alert tells a person when a night goes wrong: it checks rules
// against the queue's jobs, runs and schedules, and sends a notice when a
// rule's condition begins to hold and another when it clears, to a
// webhook, by email (package queue/alert/email), or to a function of
// yours; and, if asked, a digest of the night every morning.
//
// # Rules
//
// Each rule is made by a constructor that returns a type whose methods
// configure it:
//
//   - [Dead]: a job failed for good (status FAILED); one episode per job.
//   - [NewErrorGroup]: an error group appeared in a run (its FAILED jobs
//     grouped by the shape of their errors, as the console groups them).
//   - [RunFailures]: a run has N or more FAILED jobs.
//   - [QueueDepth]: a queue has held N or more QUEUED jobs for M minutes.
//   - [OldestDue]: a queue's oldest due job has waited longer than D.
//   - [SlowKind]: a kind's p95 duration today is above k times its usual
//     p95 (the median of the daily p95 over the last N days).
//   - [MissedTick]: a schedule has ticks that were due and did not fire.
//   - [RunDeadline]: a run that started before a daily deadline (such as
//     05:00 local time) has not finished by it.
//
// Rules read through the client's public methods (List, Runs, Queues,
// ScheduleStates, Review, History); the ones that read runs or failed jobs
// look back [DefaultLookback] unless told otherwise.
//
// # Episodes
//
// A rule's condition holding for one key (a job, a run, a queue, a
// schedule) is an episode. It fires once, when it begins to hold (or, for
// a rule with a time to hold, such as QueueDepth, once it has held that
// long), and it resolves once, when it no longer holds; each of the two
// sends one notice of [TypeFiring] or [TypeResolved] to every sink. A
// condition that holds again later is a new episode.
//
// Episodes are kept in the database (tables sheaf_alert_episodes,
// sheaf_alert_notices, sheaf_alert_silences, of schema version 10), so a
// process that restarts, or another one, carries on without losing or
// repeating a notice. The queue's maintenance deletes them once they have
// ended long enough ago (queue.Retention.Alerts, 90 days by default, at
// least 7): resolved episodes and digests with their notices, once every
// notice is sent (one not yet sent is never deleted), and silences past
// their end. Firing and pending episodes stay however old.
//
// # Delivery
//
// A change of an episode and the notices it owes are recorded in one
// transaction; the notices are then sent, and each is marked sent once
// its sink accepted it. A send that fails is tried again at the next
// round due, the waits doubling from 30 seconds to an hour
// ([WithRetryBackoff]), until it succeeds: nothing is dropped. A process
// that dies between a send and its mark sends that notice again: every
// notice carries an event ID, the same in every copy, and receivers drop
// the duplicates by it (the webhook sends it in [EventIDHeader], email in
// the Message-ID).
//
// The [Webhook] sink POSTs each notice as JSON, signed with a shared
// secret: [SignatureHeader] carries "sha256=" and the hex HMAC-SHA256 of
// the body, as [Sign] computes it. [SinkFunc] makes a sink of a function.
//
// # Silences
//
// [Alerter.Silence] mutes a rule's notices until a time, for every key or
// for one kind or queue. An episode that fires while muted is recorded but
// not announced; if it still holds when the silence ends, it is announced
// then. One that resolves while muted sends nothing; one announced before
// the silence began still announces its resolution.
//
// # One sender
//
// An [Alerter] is a task of the queue's maintenance: give one to every
// runner with queue.WithMaintenance, and the runner elected leader runs
// it, so that one process evaluates the rules and sends. Two Alerters
// that run at once anyway (say, Run called by hand) still record each
// episode and send each notice once, because every change is a guarded
// update that only one of them wins.
//
// # Digest
//
// [WithDigest] sends, once a day at a local time, the review of the 24
// hours before it (queue.Client.Review) as one notice of [TypeDigest]:
// jobs by status, failures, slow jobs, jobs that never ran, missed ticks
// and stopped chains.
package alert
