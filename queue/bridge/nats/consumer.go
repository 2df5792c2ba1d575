package nats

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sheaf-dev/sheaf/queue/bridge"
	"github.com/sheaf-dev/sheaf/queue/bridge/internal/consume"
)

// ReasonHeader is the header of a dead letter that says why its request
// was refused.
const ReasonHeader = "Sheaf-Reason"

// ConsumerConfig is what a Consumer is built from. JetStream, Stream,
// Durable, DeadLetterSubject and Submitter must be set.
type ConsumerConfig struct {
	JetStream         jetstream.JetStream
	Stream            string // the stream of job requests
	Durable           string // the durable consumer's name, created or updated at Start
	DeadLetterSubject string // where malformed requests go, with ReasonHeader
	Submitter         *bridge.Submitter
	// MaxBatch is the most messages enqueued in one transaction (default
	// 5000). The consumer fetches the next batch while one is enqueued.
	MaxBatch int
	// AckWait is how long the server waits for a message's ack before it
	// delivers it again (default 30 seconds).
	AckWait time.Duration
	Log     *slog.Logger // default slog.Default()
}

// Consumer reads job requests (bridge.Request, JSON) from a JetStream
// stream through a durable pull consumer and enqueues them through a
// bridge.Submitter, each with the idempotency key "nats:stream/sequence".
// It acknowledges a batch's messages only after its jobs committed: a
// consumer that dies before has them delivered again after the ack wait,
// and their keys make no second job. A malformed request is published to
// the dead-letter subject, with ReasonHeader, before the acknowledgement.
// Before each fetch it waits while too many of its jobs are queued
// (Submitter.Wait).
type Consumer struct {
	cfg  ConsumerConfig
	loop consume.Loop

	afterSubmit func() // between a batch's enqueue and its acks: tests kill the consumer there
}

// NewConsumer returns a consumer of cfg; it creates its durable consumer
// at Start.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if cfg.JetStream == nil || cfg.Stream == "" || cfg.Durable == "" || cfg.DeadLetterSubject == "" || cfg.Submitter == nil {
		return nil, fmt.Errorf("%w: a consumer needs JetStream, a stream, a durable name, a dead-letter subject and a submitter", bridge.ErrInvalid)
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 5000
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = 30 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Consumer{cfg: cfg}, nil
}

// Start creates (or updates) the durable consumer and consumes until Stop
// or the end of ctx. Calls after the first do nothing.
func (c *Consumer) Start(ctx context.Context) error {
	var cons jetstream.Consumer
	return c.loop.Start(ctx, func() (err error) {
		cons, err = c.cfg.JetStream.CreateOrUpdateConsumer(ctx, c.cfg.Stream, jetstream.ConsumerConfig{Durable: c.cfg.Durable,
			AckPolicy: jetstream.AckExplicitPolicy, AckWait: c.cfg.AckWait, MaxAckPending: 2 * c.cfg.MaxBatch})
		if err != nil {
			return fmt.Errorf("nats: consumer: %w", err)
		}
		return nil
	}, func(ctx context.Context) error { return c.run(ctx, cons) })
}

// Stop stops consuming and waits for the batch in hand (its enqueue and
// acknowledgements) or for ctx. It is safe without Start, and idempotent.
func (c *Consumer) Stop(ctx context.Context) error { return c.loop.Stop(ctx) }

// run fetches a batch while the one before is enqueued: the two wait on
// different servers, and one after the other they left each idle half the
// time. MaxAckPending (twice MaxBatch) leaves room for both.
func (c *Consumer) run(ctx context.Context, cons jetstream.Consumer) error {
	batches := make(chan fetched) // unbuffered: one batch fetched ahead at most
	fetchCtx, cancel := context.WithCancel(ctx)
	fetchDone := make(chan error, 1)
	go func() {
		defer close(batches)
		fetchDone <- c.fetch(fetchCtx, cons, batches)
	}()
	var err error
	for f := range batches {
		if err = c.batch(ctx, f); err != nil {
			break
		}
	}
	cancel()
	for f := range batches { // the fetcher's last, if it was handing one over
		nak(f.msgs)
	}
	if fetchErr := <-fetchDone; err == nil {
		err = fetchErr
	}
	return err
}

// fetched is a batch of messages and the submissions they carry.
type fetched struct {
	msgs []jetstream.Msg
	subs []bridge.Submission
}

// fetch fetches batches and hands them to out until ctx ends.
func (c *Consumer) fetch(ctx context.Context, cons jetstream.Consumer, out chan<- fetched) error {
	for {
		if err := consume.Retry(ctx, c.cfg.Log, "nats: consumer: wait", func() error { return c.cfg.Submitter.Wait(ctx) }); err != nil {
			return err
		}
		var f fetched
		b, err := cons.FetchNoWait(c.cfg.MaxBatch)
		if err == nil {
			f, err = submissions(b)
		}
		if ctx.Err() != nil {
			nak(f.msgs)
			return ctx.Err()
		}
		switch {
		case err != nil:
			c.cfg.Log.ErrorContext(ctx, "nats: consumer: fetch", "err", err)
			nak(f.msgs)
			err = consume.Sleep(ctx, consume.RetryDelay)
		case len(f.msgs) == 0:
			// FetchNoWait returns at once when nothing is pending:
			// pause rather than spin.
			err = consume.Sleep(ctx, 50*time.Millisecond)
		default:
			select {
			case out <- f:
			case <-ctx.Done():
				nak(f.msgs)
				err = ctx.Err()
			}
		}
		if err != nil {
			return err
		}
	}
}

// nak hands msgs back to the server, to be delivered again now rather than
// after the ack wait. It is best effort: a lost nak leaves the ack wait.
func nak(msgs []jetstream.Msg) {
	for _, m := range msgs {
		_ = m.Nak()
	}
}

// submissions reads the messages of b and the submissions they carry.
func submissions(b jetstream.MessageBatch) (fetched, error) {
	var f fetched
	for m := range b.Messages() {
		f.msgs = append(f.msgs, m)
	}
	f.subs = make([]bridge.Submission, len(f.msgs))
	for i, m := range f.msgs {
		meta, err := m.Metadata()
		if err != nil {
			return f, err
		}
		h := make(map[string]string, len(m.Headers()))
		for k := range m.Headers() {
			h[k] = m.Headers().Get(k)
		}
		f.subs[i] = bridge.Submission{Key: "nats:" + meta.Stream + "/" + strconv.FormatUint(meta.Sequence.Stream, 10), Value: m.Data(), Headers: h}
	}
	return f, nil
}

// batch enqueues the submissions of f, dead-letters the malformed, and
// acknowledges every message, each step tried again until it succeeds or
// ctx ends.
func (c *Consumer) batch(ctx context.Context, f fetched) error {
	msgs, subs := f.msgs, f.subs
	var rejected []bridge.Rejected
	if err := consume.Retry(ctx, c.cfg.Log, "nats: consumer: enqueue", func() (err error) {
		rejected, err = c.cfg.Submitter.Submit(ctx, subs)
		return err
	}); err != nil {
		return err
	}
	if c.afterSubmit != nil {
		c.afterSubmit()
	}
	for _, rj := range rejected {
		m := msgs[rj.Index]
		dead := &nats.Msg{Subject: c.cfg.DeadLetterSubject, Data: m.Data(), Header: nats.Header{}}
		for k, v := range m.Headers() {
			dead.Header[k] = v
		}
		dead.Header.Set(ReasonHeader, rj.Reason)
		if err := consume.Retry(ctx, c.cfg.Log, "nats: consumer: dead-letter", func() error {
			_, err := c.cfg.JetStream.PublishMsg(ctx, dead)
			return err
		}); err != nil {
			return err
		}
	}
	for _, m := range msgs {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A lost ack has the message delivered again, and its key makes
		// no second job.
		if err := m.Ack(); err != nil {
			c.cfg.Log.WarnContext(ctx, "nats: consumer: ack", "err", err)
		}
	}
	return nil
}
