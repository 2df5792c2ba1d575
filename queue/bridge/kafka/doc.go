// Package kafka carries the events of package queue/bridge to Kafka,
// through github.com/twmb/franz-go: a [Publisher] for a bridge.Relay, and
// a [Consumer] that enqueues job requests from topics as a consumer group,
// committing offsets only after the jobs committed, and sends malformed
// requests to a dead-letter topic.
// It is a package of its own so that a program that uses NATS does not
// build Kafka's client, and the other way round.
//
// Its tests run against franz-go's kfake, an in-process cluster that
// speaks the Kafka protocol and keeps its data in memory; no Kafka broker
// runs on the machines that test sheaf.
package kafka
