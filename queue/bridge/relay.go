package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/internal/access"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Event is a lifecycle event of a job.
type Event string

// The events the outbox records, one per change of a job's status.
const (
	// Created: the job was inserted (Enqueue, a schedule's tick, a
	// dependency's child, EnqueueBulk).
	Created Event = store.EventCreated
	// Retrying: an attempt failed (or its runner died) and the job waits
	// for another; or a failed or cancelled job was retried by hand.
	Retrying Event = store.EventRetrying
	// Completed: the job completed.
	Completed Event = store.EventCompleted
	// Failed: the job failed for good, its attempts spent or its error
	// permanent: the dead letter.
	Failed Event = store.EventFailed
	// Cancelled: the job was cancelled.
	Cancelled Event = store.EventCancelled
	// Started: an attempt of the job began (a runner claimed it). Recorded
	// only when asked for (WithStarted, or Enable with Started), since it
	// writes a row per claimed job.
	Started Event = store.EventStarted
)

// Events are every Event, in the order of a job's life.
var Events = []Event{Created, Started, Retrying, Completed, Failed, Cancelled}

// Type is the CloudEvents type of e: "dev.sheaf.job." and e.
func (e Event) Type() string { return TypePrefix + string(e) }

// TypePrefix starts every event's CloudEvents type.
const TypePrefix = "dev.sheaf.job."

// Message is one event as a Publisher sends it: a CloudEvents 1.0 event in
// structured mode, or in binary mode (WithBinaryMode).
type Message struct {
	// ID is the event's CloudEvents id, the same in every copy sent: a
	// consumer drops duplicates by it (with the source).
	ID string
	// Source is the event's CloudEvents source (WithSource): with ID, it
	// names the event uniquely.
	Source string
	// Topic is the Kafka topic or NATS subject of the event's type.
	Topic string
	// Key is the job's ID: a Kafka publisher that partitions by key keeps a
	// job's events in one partition, in order.
	Key string
	// Headers carry content-type (ContentType in structured mode,
	// application/json in binary mode) and the job's W3C trace context
	// (traceparent, tracestate) when it has one; in binary mode also the
	// event's attributes, each under the publisher's prefix (see
	// HeaderPrefixer): ce_id, ce_source, ce_type... on Kafka.
	Headers map[string]string
	// Value is the event, as CloudEvents' structured JSON; in binary mode,
	// the event's data alone (Data, as JSON).
	Value []byte
}

// Publisher sends messages to a broker. Packages queue/bridge/kafka and
// queue/bridge/nats implement it.
type Publisher interface {
	// Publish sends msgs in order and waits until the broker has
	// acknowledged (stored) each or ctx ends. It returns nil when every
	// message was acknowledged; otherwise one error per message, nil for
	// those acknowledged. A message whose fate is unknown counts as not
	// acknowledged: it is sent again later, with the same ID.
	Publish(ctx context.Context, msgs []Message) []error
}

// HeaderPrefixer is implemented by a Publisher whose CloudEvents protocol
// binding names how the attribute headers of binary mode begin: "ce_" for
// Kafka, "ce-" for NATS. A relay in binary mode uses DefaultHeaderPrefix
// for a publisher that does not implement it.
type HeaderPrefixer interface {
	HeaderPrefix() string
}

// DefaultHeaderPrefix begins the attribute headers of binary mode for a
// publisher that is no HeaderPrefixer: HTTP's binding's prefix.
const DefaultHeaderPrefix = "ce-"

// Defaults of the options.
const (
	DefaultSource       = "sheaf"
	DefaultBatch        = 1000
	DefaultPollInterval = 20 * time.Millisecond
	DefaultRetryDelay   = time.Second
)

// DefaultTopic is the topic of an event no option names one for:
// "sheaf.job." and the event.
func DefaultTopic(e Event) string { return "sheaf.job." + string(e) }

// Relay publishes the outbox's events and deletes each once its broker
// acknowledged it. It is a queue.MaintenanceTask: give it to every runner
// that may lead the maintenance with queue.WithMaintenance, and the leader
// runs it, so one relay publishes at a time across the runners.
//
// Its first round turns the outbox on (see Enable), if it is not already.
type Relay struct {
	db     *gorm.DB
	st     store.Store
	pub    Publisher
	cfg    config
	prefix string // of binary mode's attribute headers
	ready  bool   // the outbox is known to be on
	cursor store.OutboxCursor
}

type config struct {
	source      string
	started     bool // record Started events
	binary      bool // binary mode
	topics      map[Event]string
	batch       int
	poll, retry time.Duration
	log         *slog.Logger
}

// Option configures a Relay.
type Option interface{ apply(*config) error }

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// ErrInvalid is returned for a nil client or publisher and for a bad
// option.
var ErrInvalid = errors.New("bridge: invalid argument")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// WithTopic sends the events of e to topic (a Kafka topic, a NATS subject)
// instead of DefaultTopic(e).
func WithTopic(e Event, topic string) Option {
	return optionFunc(func(c *config) error {
		if _, ok := c.topics[e]; !ok {
			return invalid("WithTopic: unknown event %q", e)
		}
		if topic == "" {
			return invalid("WithTopic: empty topic for %q", e)
		}
		c.topics[e] = topic
		return nil
	})
}

// WithSource sets the events' CloudEvents source (default DefaultSource).
// Event IDs are unique within one database's outbox: give the queues of
// different databases that share a broker different sources.
func WithSource(source string) Option {
	return optionFunc(func(c *config) error {
		if source == "" {
			return invalid("WithSource: empty source")
		}
		c.source = source
		return nil
	})
}

// WithStarted makes the relay's first round turn on the recording of Started
// events too, if it is not on already (see Enable). It costs every claim a
// row in the outbox.
func WithStarted() Option {
	return optionFunc(func(c *config) error {
		c.started = true
		return nil
	})
}

// WithBinaryMode sends each event in CloudEvents' binary mode: the data
// (Data, as JSON) is the message's value, and the attributes are headers
// (see Message.Headers), which brokers and consumers can route on without
// reading the value.
func WithBinaryMode() Option {
	return optionFunc(func(c *config) error {
		c.binary = true
		return nil
	})
}

// WithBatch sets how many events a relay reads and publishes at once
// (default DefaultBatch, 1 to 10000).
func WithBatch(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 || n > 10000 {
			return invalid("WithBatch: %d is not within 1 to 10000", n)
		}
		c.batch = n
		return nil
	})
}

// WithPollInterval sets how long the relay waits, once the outbox is
// empty, before it looks again (default DefaultPollInterval): the most an
// event waits before the relay reads it. After a round that published
// events, it waits a quarter of that.
func WithPollInterval(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return invalid("WithPollInterval: %v is not positive", d)
		}
		c.poll = d
		return nil
	})
}

// WithRetryDelay sets how long the relay waits after its broker failed
// before it tries again (default DefaultRetryDelay).
func WithRetryDelay(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return invalid("WithRetryDelay: %v is not positive", d)
		}
		c.retry = d
		return nil
	})
}

// WithLogger sets where the relay logs (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			return invalid("WithLogger: nil logger")
		}
		c.log = l
		return nil
	})
}

// NewRelay returns a relay of client's outbox to pub. It starts nothing
// and reads nothing: the runner that leads runs it.
func NewRelay(client *queue.Client, pub Publisher, opts ...Option) (*Relay, error) {
	if client == nil || pub == nil {
		return nil, invalid("nil client or publisher")
	}
	cfg := config{source: DefaultSource, topics: map[Event]string{}, batch: DefaultBatch, poll: DefaultPollInterval,
		retry: DefaultRetryDelay, log: slog.Default()}
	for _, e := range Events {
		cfg.topics[e] = DefaultTopic(e)
	}
	for _, o := range opts {
		if o == nil {
			return nil, invalid("nil option")
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	r := &Relay{pub: pub, cfg: cfg, prefix: DefaultHeaderPrefix}
	if p, ok := pub.(HeaderPrefixer); ok {
		r.prefix = p.HeaderPrefix()
	}
	r.db, r.st = access.Client(client)
	return r, nil
}

// Enable turns client's outbox on: from its return, every lifecycle change
// of a job, whatever process makes it, writes its event in the change's
// transaction, until Disable. optional names the events recorded only when
// asked for: Started is the one. A relay's first round enables the outbox
// too; enable it before the first runner starts for the events of the
// jobs enqueued before then. It waits for the transactions that are
// writing jobs to end (10 seconds at most, on PostgreSQL).
func Enable(ctx context.Context, client *queue.Client, optional ...Event) error {
	started := false
	for _, e := range optional {
		if e != Started {
			return invalid("Enable: %q is recorded always; only %q is optional", e, Started)
		}
		started = true
	}
	db, st := access.Client(client)
	if err := store.EnableOutbox(ctx, st, db, started); err != nil {
		return fmt.Errorf("bridge: enable the outbox: %w", err)
	}
	return nil
}

// Disable turns client's outbox off: changes write no event from its
// return on. The events written before stay in the outbox for a relay.
// A relay that runs later turns the outbox on again.
func Disable(ctx context.Context, client *queue.Client) error {
	db, st := access.Client(client)
	if err := store.DisableOutbox(ctx, st, db); err != nil {
		return fmt.Errorf("bridge: disable the outbox: %w", err)
	}
	return nil
}

// Name names the task: "bridge".
func (*Relay) Name() string { return "bridge" }

// Run publishes the outbox's events, a batch at a time, until it is empty,
// and returns the poll interval; after a failure of the broker or the
// database, it returns the retry delay and the error.
//
// A job's events are published in order: a batch is sent in waves, the
// first pending event of each job, then the second, and so on, each wave
// once the one before was acknowledged, and an event whose publishing
// failed holds back its job's later events until it is acknowledged. An
// event is deleted only after its broker acknowledged it; if the process
// dies in between, the next round sends it again, with the same ID.
func (r *Relay) Run(ctx context.Context) (time.Duration, error) {
	if !r.ready {
		if err := store.EnableOutbox(ctx, r.st, r.db, r.cfg.started); err != nil {
			return r.cfg.retry, fmt.Errorf("bridge: enable the outbox: %w", err)
		}
		r.ready = true
	}
	published := false
	for ctx.Err() == nil {
		events, err := r.cursor.Read(ctx, r.st, r.db, r.cfg.batch)
		if err != nil {
			return r.cfg.retry, fmt.Errorf("bridge: read the outbox: %w", err)
		}
		acked, pubErr := r.publish(ctx, events)
		if err := store.DeleteOutbox(ctx, r.st, r.db, acked); err != nil {
			return r.cfg.retry, fmt.Errorf("bridge: delete %d published events: %w", len(acked), err)
		}
		r.cursor.Deleted(acked)
		if pubErr != nil {
			return r.cfg.retry, pubErr
		}
		published = published || len(events) > 0
		if len(events) < r.cfg.batch {
			break
		}
	}
	if published {
		// Jobs are changing: more events are likely on their way, and
		// a shorter wait shortens their delivery.
		return r.cfg.poll / 4, nil
	}
	return r.cfg.poll, nil
}

// publish sends events in waves (see Run) and returns the IDs of those
// acknowledged, and the first error.
func (r *Relay) publish(ctx context.Context, events []store.OutboxEvent) (acked []int64, err error) {
	waves := wavesOf(events)
	acked = make([]int64, 0, len(events))
	var blocked map[int64]bool // jobs with an event not acknowledged
	for _, wave := range waves {
		msgs, rows := make([]Message, 0, len(wave)), make([]*store.OutboxEvent, 0, len(wave))
		for i := range wave {
			e := &wave[i]
			if blocked[e.JobID] {
				continue
			}
			m, err := r.message(e)
			if err != nil {
				// What the database holds does not make an event:
				// nothing to retry, so it is logged and dropped.
				r.cfg.log.ErrorContext(ctx, "bridge: dropped an event that does not encode", "event", e.ID, "job", e.JobID, "err", err)
				acked = append(acked, e.ID)
				continue
			}
			msgs, rows = append(msgs, m), append(rows, e)
		}
		if len(msgs) == 0 {
			continue
		}
		errs := r.pub.Publish(ctx, msgs)
		if errs != nil && len(errs) != len(msgs) {
			return acked, fmt.Errorf("bridge: the publisher returned %d results for %d messages", len(errs), len(msgs))
		}
		for i, e := range rows {
			if errs != nil && errs[i] != nil {
				if blocked == nil {
					blocked = map[int64]bool{}
				}
				blocked[e.JobID] = true
				if err == nil {
					err = fmt.Errorf("bridge: publish event %s of job %d: %w", msgs[i].ID, e.JobID, errs[i])
				}
				continue
			}
			acked = append(acked, e.ID)
		}
	}
	return acked, err
}

// wavesOf splits events (in ID order) so that wave n holds the n-th event
// of every job that has one, in ID order. A batch whose jobs each have one
// event, as most have, is one wave: events itself.
func wavesOf(events []store.OutboxEvent) [][]store.OutboxEvent {
	seen := make(map[int64]int, len(events))
	most := 0
	for _, e := range events {
		n := seen[e.JobID] + 1
		seen[e.JobID], most = n, max(most, n)
	}
	if most <= 1 {
		return [][]store.OutboxEvent{events}
	}
	clear(seen)
	waves := make([][]store.OutboxEvent, most)
	for _, e := range events {
		n := seen[e.JobID]
		seen[e.JobID] = n + 1
		waves[n] = append(waves[n], e)
	}
	return waves
}

// Data is the data of every event: the job as the change left it.
type Data struct {
	JobID         int64  `json:"job_id"`
	Kind          string `json:"kind"`
	Queue         string `json:"queue"`
	Attempt       int    `json:"attempt"`
	MaxAttempts   int    `json:"max_attempts"`
	Error         string `json:"error,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
	RunID         string `json:"run_id,omitempty"`
}

// CloudEvent is the structured JSON of an event, CloudEvents 1.0 with the
// distributed tracing extension.
type CloudEvent struct {
	SpecVersion     string    `json:"specversion"`
	ID              string    `json:"id"`
	Source          string    `json:"source"`
	Type            string    `json:"type"`
	Subject         string    `json:"subject"`
	Time            time.Time `json:"time"`
	DataContentType string    `json:"datacontenttype"`
	TraceParent     string    `json:"traceparent,omitempty"`
	TraceState      string    `json:"tracestate,omitempty"`
	Data            Data      `json:"data"`
}

// appendJSON appends ce as json.Marshal encodes it, without its
// reflection: the relay encodes every event, and json.Marshal was the most
// of its own CPU time per event.
func (ce *CloudEvent) appendJSON(b []byte) []byte {
	b = appendField(b, '{', "specversion", ce.SpecVersion)
	b = appendField(b, ',', "id", ce.ID)
	b = appendField(b, ',', "source", ce.Source)
	b = appendField(b, ',', "type", ce.Type)
	b = appendField(b, ',', "subject", ce.Subject)
	b = append(b, `,"time":"`...)
	b = append(ce.Time.AppendFormat(b, time.RFC3339Nano), '"')
	b = appendField(b, ',', "datacontenttype", ce.DataContentType)
	if ce.TraceParent != "" {
		b = appendField(b, ',', "traceparent", ce.TraceParent)
	}
	if ce.TraceState != "" {
		b = appendField(b, ',', "tracestate", ce.TraceState)
	}
	b = append(b, `,"data":`...)
	return append(ce.Data.appendJSON(b), '}')
}

// appendJSON appends d as json.Marshal encodes it.
func (d *Data) appendJSON(b []byte) []byte {
	b = append(b, `{"job_id":`...)
	b = strconv.AppendInt(b, d.JobID, 10)
	b = appendField(b, ',', "kind", d.Kind)
	b = appendField(b, ',', "queue", d.Queue)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(d.Attempt), 10)
	b = append(b, `,"max_attempts":`...)
	b = strconv.AppendInt(b, int64(d.MaxAttempts), 10)
	for _, f := range [...]struct{ name, v string }{{"error", d.Error}, {"correlation_id", d.CorrelationID}, {"run_id", d.RunID}} {
		if f.v != "" {
			b = appendField(b, ',', f.name, f.v)
		}
	}
	return append(b, '}')
}

// appendField appends sep, the JSON name (which needs no escaping) and the
// string v.
func appendField(b []byte, sep byte, name, v string) []byte {
	b = append(b, sep, '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, v)
}

// appendString appends s as a JSON string, as json.Marshal writes it: a
// string of printable ASCII with nothing to escape is copied, and any
// other is left to json.Marshal (control characters, quotes, HTML's <, >
// and &, and UTF-8, valid or not).
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// ContentType is the content-type header of every message in structured
// mode.
const ContentType = "application/cloudevents+json"

// message makes the message of e.
func (r *Relay) message(e *store.OutboxEvent) (Message, error) {
	meta, err := store.DecodeMetadata(e.Meta)
	if err != nil {
		return Message{}, err
	}
	job := strconv.FormatInt(e.JobID, 10)
	ce := CloudEvent{SpecVersion: "1.0", ID: strconv.FormatInt(e.ID, 10), Source: r.cfg.source, Type: Event(e.Event).Type(),
		Subject: job, Time: e.At.UTC(), DataContentType: "application/json",
		TraceParent: meta["traceparent"], TraceState: meta["tracestate"],
		Data: Data{JobID: e.JobID, Kind: e.Kind, Queue: e.Queue, Attempt: e.Attempts, MaxAttempts: e.MaxAttempts,
			Error: e.Error, CorrelationID: e.CorrelationID, RunID: e.RunID}}
	headers := make(map[string]string, 3)
	headers["content-type"] = ContentType
	var value []byte
	if r.cfg.binary {
		value = ce.Data.appendJSON(make([]byte, 0, 256))
		headers["content-type"] = ce.DataContentType
		for _, a := range [...]struct{ name, v string }{{"specversion", ce.SpecVersion}, {"id", ce.ID}, {"source", ce.Source},
			{"type", ce.Type}, {"subject", ce.Subject}, {"time", ce.Time.Format(time.RFC3339Nano)}} {
			headers[r.prefix+a.name] = a.v
		}
	} else {
		value = ce.appendJSON(make([]byte, 0, 512))
	}
	if ce.TraceParent != "" {
		headers["traceparent"] = ce.TraceParent
	}
	if ce.TraceState != "" {
		headers["tracestate"] = ce.TraceState
	}
	topic, ok := r.cfg.topics[Event(e.Event)]
	if !ok {
		return Message{}, fmt.Errorf("unknown event %q", e.Event)
	}
	return Message{ID: ce.ID, Source: ce.Source, Topic: topic, Key: job, Headers: headers, Value: value}, nil
}
