package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sheaf-dev/sheaf/queue/bridge"
	"github.com/sheaf-dev/sheaf/queue/bridge/internal/consume"
)

// ReasonHeader is the header of a dead letter that says why its request
// was refused.
const ReasonHeader = "sheaf-reason"

// ConsumerConfig is what a Consumer is built from. Brokers, Group, Topics,
// DeadLetterTopic and Submitter must be set.
type ConsumerConfig struct {
	Brokers         []string
	Group           string   // the consumer group
	Topics          []string // the topics of job requests
	DeadLetterTopic string   // where malformed requests go, with ReasonHeader
	Submitter       *bridge.Submitter
	// MaxBatch is the most records enqueued in one transaction (default
	// 5000).
	MaxBatch int
	// Options are more options for the client, such as SASL or TLS. The
	// consumer's own (the group, the topics, manual commits, rebalances
	// held while a batch is in hand) come after them.
	Options []kgo.Opt
	Log     *slog.Logger // default slog.Default()
}

// Consumer reads job requests (bridge.Request, JSON) from Kafka topics as
// a member of a consumer group and enqueues them through a
// bridge.Submitter, each with the idempotency key
// "kafka:topic/partition/offset". It commits a batch's offsets only after
// its jobs committed, and the group's rebalances wait for that commit, so
// every partition's committed offset is at the end of a contiguous run of
// finished records: a consumer that dies before its commit has the
// records delivered again, and their keys make no second job. A malformed
// request is produced to the dead-letter topic, with ReasonHeader, before
// the commit, and the consumer moves on. Before each fetch it waits while
// too many of its jobs are queued (Submitter.Wait).
type Consumer struct {
	cfg  ConsumerConfig
	loop consume.Loop

	afterSubmit func() // between a batch's enqueue and its commit: tests kill the consumer there
}

// NewConsumer returns a consumer of cfg; it connects at Start.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if len(cfg.Brokers) == 0 || cfg.Group == "" || len(cfg.Topics) == 0 || cfg.DeadLetterTopic == "" || cfg.Submitter == nil {
		return nil, fmt.Errorf("%w: a consumer needs brokers, a group, topics, a dead-letter topic and a submitter", bridge.ErrInvalid)
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 5000
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Consumer{cfg: cfg}, nil
}

// Start connects and consumes until Stop or the end of ctx. Calls after
// the first do nothing.
func (c *Consumer) Start(ctx context.Context) error {
	var cl *kgo.Client
	return c.loop.Start(ctx, func() (err error) {
		opts := append(append([]kgo.Opt(nil), c.cfg.Options...), kgo.SeedBrokers(c.cfg.Brokers...), kgo.ConsumerGroup(c.cfg.Group),
			kgo.ConsumeTopics(c.cfg.Topics...), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll())
		if cl, err = kgo.NewClient(opts...); err != nil {
			return fmt.Errorf("kafka: consumer: %w", err)
		}
		return nil
	}, func(ctx context.Context) error {
		defer cl.Close()
		// A client that holds rebalances back would wait for them in
		// Close: a batch cut short releases them first.
		defer cl.AllowRebalance()
		return c.run(ctx, cl)
	})
}

// Stop stops consuming, waits for the batch in hand (its enqueue and
// commit) or for ctx, and leaves the group. It is safe without Start, and
// idempotent.
func (c *Consumer) Stop(ctx context.Context) error { return c.loop.Stop(ctx) }

func (c *Consumer) run(ctx context.Context, cl *kgo.Client) error {
	for {
		if err := consume.Retry(ctx, c.cfg.Log, "kafka: consumer: wait", func() error { return c.cfg.Submitter.Wait(ctx) }); err != nil {
			return err
		}
		fetches := cl.PollRecords(ctx, c.cfg.MaxBatch)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			c.cfg.Log.WarnContext(ctx, "kafka: fetch", "topic", topic, "partition", partition, "err", err)
		})
		if recs := fetches.Records(); len(recs) > 0 {
			if err := c.batch(ctx, cl, recs); err != nil {
				return err
			}
		}
		cl.AllowRebalance()
	}
}

// batch enqueues recs, dead-letters the malformed, and commits, each step
// tried again until it succeeds or ctx ends.
func (c *Consumer) batch(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) error {
	subs := make([]bridge.Submission, len(recs))
	for i, r := range recs {
		h := make(map[string]string, len(r.Headers))
		for _, kv := range r.Headers {
			h[kv.Key] = string(kv.Value)
		}
		subs[i] = bridge.Submission{Key: "kafka:" + r.Topic + "/" + strconv.Itoa(int(r.Partition)) + "/" + strconv.FormatInt(r.Offset, 10),
			Value: r.Value, Headers: h}
	}
	var rejected []bridge.Rejected
	if err := c.retry(ctx, "enqueue", func() (err error) {
		rejected, err = c.cfg.Submitter.Submit(ctx, subs)
		return err
	}); err != nil {
		return err
	}
	if c.afterSubmit != nil {
		c.afterSubmit()
	}
	if len(rejected) > 0 {
		dead := make([]*kgo.Record, len(rejected))
		for i, rj := range rejected {
			r := recs[rj.Index]
			headers := append(append([]kgo.RecordHeader(nil), r.Headers...), kgo.RecordHeader{Key: ReasonHeader, Value: []byte(rj.Reason)})
			dead[i] = &kgo.Record{Topic: c.cfg.DeadLetterTopic, Key: r.Key, Value: r.Value, Headers: headers}
		}
		if err := c.retry(ctx, "dead-letter", func() error { return cl.ProduceSync(ctx, dead...).FirstErr() }); err != nil {
			return err
		}
	}
	return c.retry(ctx, "commit", func() error { return cl.CommitRecords(ctx, recs...) })
}

// retry runs step as consume.Retry does.
func (c *Consumer) retry(ctx context.Context, what string, step func() error) error {
	return consume.Retry(ctx, c.cfg.Log, "kafka: consumer: "+what, step)
}
