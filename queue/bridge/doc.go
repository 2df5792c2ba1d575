// Package bridge announces the lifecycle of a queue's jobs on a message
// broker, Kafka (package queue/bridge/kafka) or NATS JetStream (package
// queue/bridge/nats), through a transactional outbox: no event is lost
// and none is invented.
//
// # The outbox
//
// While the outbox is on ([Enable], or a [Relay]'s first round), every
// change of a job's status writes an event row in the transaction of the
// change, whatever process or statement makes it: [Created], [Retrying],
// [Completed], [Failed] (the dead letter), [Cancelled]. A claim writes
// none unless asked for: with [Enable]'s [Started], or a relay's
// [WithStarted], each claim writes a [Started] event, the attempt it
// begins in its data. The rows are written by database triggers that exist only while
// the outbox is on, so a queue without a bridge pays nothing; [Disable]
// drops them. On PostgreSQL the triggers are statement-level: a claim, a
// completion or a bulk insert writes the events of all its jobs in one
// statement, whose join of the rows before and after the change is never
// planned as a nested loop (a connection keeps the plan of its first such
// statement, and a nested loop planned for one job took seconds for a
// later statement of thousands). The outbox needs schema version 13.
//
// # The relay
//
// A [Relay] is a queue.MaintenanceTask: give it to the runners with
// queue.WithMaintenance, and the one that leads the maintenance publishes
// the outbox, so one relay publishes at a time. It reads the events in
// order, a batch at a time ([WithBatch]), publishes them through a
// [Publisher] and deletes each once the broker acknowledged it. It reads
// on from the highest ID it has read, not from the start of the outbox,
// which the deleted rows clutter until the table is vacuumed; below that
// it reads again only the events whose publishing failed and the IDs no
// read found, which a transaction may yet commit: on PostgreSQL it keeps
// such an ID until every transaction that could commit it has ended, and
// a long transaction elsewhere on the server costs each read a look in the
// index per ID kept, never a walk over the deleted events. Delivery
// is at least once: a relay that dies between the broker's
// acknowledgement and the delete sends the event again, with the same ID.
// A job's events are published in order: each only after every earlier
// event of its job was acknowledged. While the broker is down, events wait
// in the outbox, and the relay tries again every [WithRetryDelay]. An
// empty outbox is read again after [WithPollInterval] (20 ms), which
// bounds how long an event waits; after a round that published events, a
// quarter of that, since jobs that are changing make more.
//
// # Messages
//
// Each event is a CloudEvents 1.0 event in structured mode ([CloudEvent];
// content-type application/cloudevents+json): its id is the outbox row's
// ID, its source [WithSource], its type [TypePrefix] and the event
// ("dev.sheaf.job.completed"), its subject the job's ID, its data the job
// ([Data]). The job's W3C trace context (queue.TraceContext) is in the
// event (the distributed tracing extension) and in the headers
// traceparent and tracestate. The key is the job's ID.
//
// In binary mode ([WithBinaryMode]) the message's value is the data alone
// (content-type application/json), and each attribute is a header under
// the prefix of the broker's CloudEvents binding ([HeaderPrefixer]):
// ce_id, ce_type, ce_source, ce_subject, ce_time, ce_specversion on Kafka;
// ce-id and so on on NATS. Consumers and brokers can then route on the
// type without decoding the value. Each event type
// has its topic (a Kafka topic, a NATS subject): [DefaultTopic], or
// [WithTopic].
//
// # Submissions
//
// A consumer of job requests ([Request], JSON: kind, payload, and
// optionally queue, priority, max_attempts, correlation_id) turns a
// broker's messages into jobs through a [Submitter]: a batch in one
// transaction, each job keyed by its message's identity, so a message
// delivered again makes no second job. The consumer commits (acknowledges)
// a batch only after [Submitter.Submit] returned: a consumer that dies in
// between has the messages delivered again, and nothing is lost or
// doubled. Malformed requests come back as [Rejected], with the reason,
// for a dead-letter topic. [Submitter.Wait] holds the consumer back while
// too many of its jobs are queued. Package queue/bridge/kafka has a
// consumer-group consumer, queue/bridge/nats a JetStream one; a message's traceparent and tracestate headers
// become its job's trace context.
//
// A batch is one INSERT that skips the keys already taken and returns only
// which those were (queue.Client.EnqueueRawKeyed): nothing of the jobs
// comes back to the consumer, which has no use for it. Both consumers take
// batches of 5,000 by default; the JetStream one fetches the next batch
// while it enqueues one, and hands a batch fetched ahead back to the
// server when it stops. Figures: examples/BENCHMARKS.md, "The event
// bridge"; measured with
//
//	SHEAF_BENCH_JOBS=40000 go test -run '^$' -bench Consumer -benchtime 1x -count 5 ./queue/bridge/kafka/
//	SHEAF_BENCH_JOBS=40000 go test -run '^$' -bench Consumer -benchtime 1x -count 5 ./queue/bridge/nats/
//
// # Cost
//
// With the outbox on, every job writes two rows (created, completed) that
// the relay reads, publishes and deletes. A queue that enqueues no-op jobs
// 5,000 at a time and works them as fast as it can works 0.84 times as
// many a second with a relay on as without (the median of five runs on an
// idle machine, 0.80 to 0.91). Asked for 5,000 jobs/s, a queue keeps up,
// and an event reaches the broker 8 ms (p50) and 29 ms (p99) after its
// change. The relay alone costs its process about 2.6 µs of CPU per event
// and the database about 3.4 µs. Submission from a topic enqueues about
// 44,000 jobs/s from Kafka and 34,000 from NATS JetStream. The figures are
// in examples/BENCHMARKS.md, "The event bridge"; measured with
//
//	go test -run '^$' -bench BridgeCost -benchtime 5x ./queue/bridge/
//	go test -run '^$' -bench BridgeDelivery -benchtime 3x ./queue/bridge/
//	SHEAF_BENCH_JOBS=20000 go test -run '^$' -bench RelayDrain -benchtime 3x ./queue/bridge/
package bridge
