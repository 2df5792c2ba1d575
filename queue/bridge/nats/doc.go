// Package nats carries the events of package queue/bridge to NATS
// JetStream, through github.com/nats-io/nats.go: a [Publisher] for a
// bridge.Relay, and a [Consumer] that enqueues job requests from a stream,
// acknowledging them only after the jobs committed, and sends malformed
// requests to a dead-letter subject. It is a package of its own so that a program that uses
// Kafka does not build the NATS client, and the other way round.
//
// Its tests run against a nats-server with JetStream on 127.0.0.1:4222
// (NATS_URL overrides it), and, where the server must go away, against
// one of their own.
package nats
