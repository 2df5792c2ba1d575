package nats

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sheaf-dev/sheaf/queue/bridge"
)

// DefaultTimeout bounds one Publish: the wait for JetStream's
// acknowledgements of a batch.
const DefaultTimeout = 10 * time.Second

// Publisher publishes a relay's messages to NATS JetStream: one message
// per event, on the event's subject, with the event's headers and its
// source and ID as Nats-Msg-Id, by which JetStream drops a copy sent again
// within the stream's duplicate window. A stream must capture the
// subjects; the publisher creates none.
type Publisher struct {
	js      jetstream.JetStream
	timeout time.Duration
}

// NewPublisher returns a publisher through js, waiting at most timeout
// (DefaultTimeout if not positive) for a batch's acknowledgements. The
// caller keeps js's connection, and closes it after the relay's runners
// have stopped.
func NewPublisher(js jetstream.JetStream, timeout time.Duration) (*Publisher, error) {
	if js == nil {
		return nil, fmt.Errorf("%w: nil JetStream", bridge.ErrInvalid)
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Publisher{js: js, timeout: timeout}, nil
}

// Publish sends msgs, all at once, and waits for their acknowledgements;
// see bridge.Publisher.
func (p *Publisher) Publish(ctx context.Context, msgs []bridge.Message) []error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	errs := make([]error, len(msgs))
	failed := false
	futures := make([]jetstream.PubAckFuture, len(msgs))
	for i, m := range msgs {
		nm := &nats.Msg{Subject: m.Topic, Data: m.Value, Header: nats.Header{}}
		for k, v := range m.Headers {
			nm.Header.Set(k, v)
		}
		f, err := p.js.PublishMsgAsync(nm, jetstream.WithMsgID(m.Source+"/"+m.ID))
		if err != nil {
			errs[i], failed = fmt.Errorf("nats: %w", err), true
			continue
		}
		futures[i] = f
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			errs[i], failed = fmt.Errorf("nats: %w", err), true
		case <-ctx.Done():
			errs[i], failed = fmt.Errorf("nats: no acknowledgement: %w", ctx.Err()), true
		}
	}
	if !failed {
		return nil
	}
	return errs
}

// HeaderPrefix is "ce-", as CloudEvents' NATS binding begins the attribute
// headers of binary mode; see bridge.HeaderPrefixer.
func (*Publisher) HeaderPrefix() string { return "ce-" }

var (
	_ bridge.Publisher      = (*Publisher)(nil)
	_ bridge.HeaderPrefixer = (*Publisher)(nil)
)
