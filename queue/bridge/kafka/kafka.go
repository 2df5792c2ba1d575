package kafka

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sheaf-dev/sheaf/queue/bridge"
)

// DefaultTimeout bounds one Publish: the wait for the broker's
// acknowledgements of a batch.
const DefaultTimeout = 10 * time.Second

// Publisher publishes a relay's messages to Kafka through a franz-go
// client: one record per message, on the message's topic, keyed by its
// job's ID (so a job's events share a partition), with the message's
// headers and a ce_id header holding the event's ID. The client's own
// options (brokers, acks, idempotence, partitioner) apply; its defaults
// (acks from all in-sync replicas, an idempotent producer, partitions by
// key) keep a job's events in order.
type Publisher struct {
	cl      *kgo.Client
	timeout time.Duration
}

// NewPublisher returns a publisher that produces through cl, waiting at
// most timeout (DefaultTimeout if not positive) for a batch's
// acknowledgements. The caller keeps cl, and closes it after the relay's
// runners have stopped.
func NewPublisher(cl *kgo.Client, timeout time.Duration) (*Publisher, error) {
	if cl == nil {
		return nil, fmt.Errorf("%w: nil kafka client", bridge.ErrInvalid)
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Publisher{cl: cl, timeout: timeout}, nil
}

// Publish produces msgs and waits for their acknowledgements; see
// bridge.Publisher.
func (p *Publisher) Publish(ctx context.Context, msgs []bridge.Message) []error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	index := make(map[*kgo.Record]int, len(msgs))
	records := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		r := &kgo.Record{Topic: m.Topic, Key: []byte(m.Key), Value: m.Value, Headers: Headers(m)}
		records[i], index[r] = r, i
	}
	var errs []error
	for _, res := range p.cl.ProduceSync(ctx, records...) {
		if res.Err == nil {
			continue
		}
		if errs == nil {
			errs = make([]error, len(msgs))
		}
		errs[index[res.Record]] = fmt.Errorf("kafka: %w", res.Err)
	}
	return errs
}

// Headers returns the record headers of m, in the order of their keys,
// with ce_id first (in structured mode too, where it is the one attribute
// among the headers).
func Headers(m bridge.Message) []kgo.RecordHeader {
	out := make([]kgo.RecordHeader, 0, len(m.Headers)+1)
	out = append(out, kgo.RecordHeader{Key: IDHeader, Value: []byte(m.ID)})
	keys := make([]string, 0, len(m.Headers))
	for k := range m.Headers {
		if k != IDHeader {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, kgo.RecordHeader{Key: k, Value: []byte(m.Headers[k])})
	}
	return out
}

// IDHeader holds the event's ID, as CloudEvents' Kafka binding names it:
// a consumer drops duplicates by it without decoding the value.
const IDHeader = "ce_id"

// Header returns the value of the header key of r, "" if it has none.
func Header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// HeaderPrefix is "ce_", as CloudEvents' Kafka binding begins the
// attribute headers of binary mode; see bridge.HeaderPrefixer.
func (*Publisher) HeaderPrefix() string { return "ce_" }

var (
	_ bridge.Publisher      = (*Publisher)(nil)
	_ bridge.HeaderPrefixer = (*Publisher)(nil)
)
