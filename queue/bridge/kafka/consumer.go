package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sheaf-dev/sheaf/queue/bridge"
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
	cfg ConsumerConfig

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	done    chan struct{}
	err     error

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
	return &Consumer{cfg: cfg, done: make(chan struct{})}, nil
}

// Start connects and consumes until Stop or the end of ctx. Calls after
// the first do nothing.
func (c *Consumer) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return nil
	}
	opts := append(append([]kgo.Opt(nil), c.cfg.Options...), kgo.SeedBrokers(c.cfg.Brokers...), kgo.ConsumerGroup(c.cfg.Group),
		kgo.ConsumeTopics(c.cfg.Topics...), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll())
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka: consumer: %w", err)
	}
	c.started = true
	ctx, c.cancel = context.WithCancel(ctx)
	go func() {
		defer close(c.done)
		defer cl.Close()
		// A client that holds rebalances back would wait for them in
		// Close: a batch cut short releases them first.
		defer cl.AllowRebalance()
		c.err = c.run(ctx, cl)
	}()
	return nil
}

// Stop stops consuming, waits for the batch in hand (its enqueue and
// commit) or for ctx, and leaves the group. It is safe without Start, and
// idempotent.
func (c *Consumer) Stop(ctx context.Context) error {
	c.mu.Lock()
	started := c.started
	c.started = true // a Start after Stop does nothing
	if c.cancel != nil {
		c.cancel()
	}
	c.mu.Unlock()
	if !started {
		return nil
	}
	select {
	case <-c.done:
		if errors.Is(c.err, context.Canceled) {
			return nil
		}
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryDelay is how long a consumer waits before it tries again a step
// that failed (an enqueue, a dead letter, a commit).
const retryDelay = 200 * time.Millisecond

func (c *Consumer) run(ctx context.Context, cl *kgo.Client) error {
	for {
		if err := c.cfg.Submitter.Wait(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c.cfg.Log.ErrorContext(ctx, "kafka: consumer", "err", err)
			if err := sleep(ctx, retryDelay); err != nil {
				return err
			}
			continue
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

// retry runs step until it succeeds or ctx ends, logging its failures.
func (c *Consumer) retry(ctx context.Context, what string, step func() error) error {
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		err := step()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.cfg.Log.ErrorContext(ctx, "kafka: consumer: "+what, "err", err)
		if err := sleep(ctx, retryDelay); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
