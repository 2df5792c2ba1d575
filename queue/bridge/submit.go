package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// Request is a job request as a submission carries it, in JSON:
//
//	{"kind": "report", "payload": {"county": "Kent"}, "priority": 7}
//
// Kind and payload are required; the others override the kind's defaults.
type Request struct {
	Kind          string          `json:"kind"`
	Payload       json.RawMessage `json:"payload"`
	Queue         string          `json:"queue,omitempty"`
	Priority      int             `json:"priority,omitempty"`
	MaxAttempts   int             `json:"max_attempts,omitempty"`
	CorrelationID string          `json:"correlation_id,omitempty"`
}

// Submission is one message that carries a Request.
type Submission struct {
	// Key is the message's identity in its broker (Kafka's topic,
	// partition and offset; a JetStream stream's name and sequence): the
	// job's idempotency key, so a message delivered twice makes one job.
	Key   string
	Value []byte
	// Headers are the message's; traceparent and tracestate, if there,
	// become the job's trace context.
	Headers map[string]string
}

// Rejected is a submission that cannot become a job, and why: a consumer
// sends it to its dead-letter topic with the reason.
type Rejected struct {
	Index  int // in the submissions given to Submit
	Reason string
}

// Defaults of a Submitter.
const (
	DefaultMaxQueued  = 100_000
	DefaultQueuedPoll = 100 * time.Millisecond
)

// Submitter turns submissions into jobs: the part of a consumer of job
// requests that does not depend on the broker (queue/bridge/kafka and
// queue/bridge/nats have the consumers). Its methods are safe for
// concurrent use.
type Submitter struct {
	client    *queue.Client
	maxQueued int64
	poll      time.Duration

	mu    sync.Mutex
	kinds []string // the kinds it has enqueued, which Wait counts
	// Wait's last count of the queued jobs, when it was made, and how
	// many jobs were submitted since.
	counted, since int64
	countedAt      time.Time
}

// NewSubmitter returns a submitter of jobs to client that holds back
// (Wait) while maxQueued (DefaultMaxQueued if not positive) or more jobs
// of the kinds it has submitted are QUEUED, looking again every poll
// (DefaultQueuedPoll if not positive).
func NewSubmitter(client *queue.Client, maxQueued int64, poll time.Duration) (*Submitter, error) {
	if client == nil {
		return nil, invalid("nil client")
	}
	if maxQueued <= 0 {
		maxQueued = DefaultMaxQueued
	}
	if poll <= 0 {
		poll = DefaultQueuedPoll
	}
	return &Submitter{client: client, maxQueued: maxQueued, poll: poll}, nil
}

// Submit enqueues the requests subs carry in one transaction, each with
// its submission's Key as idempotency key, and returns those that cannot
// become jobs (not a JSON Request, an unknown kind, a payload the kind
// refuses, a bad option), which it leaves out. A submission whose key is
// taken already (delivered before) makes no new job. When it returns
// without an error, the jobs have committed, and the consumer may commit
// or acknowledge every submission; with an error (the database's),
// nothing was stored and the consumer must not.
func (s *Submitter) Submit(ctx context.Context, subs []Submission) ([]Rejected, error) {
	var rejected []Rejected
	params := make([]queue.RawParams, 0, len(subs))
	index := make([]int, 0, len(subs)) // params[i] is of subs[index[i]]
	var kinds []string
	for i, sub := range subs {
		p, err := decodeRequest(sub)
		if err != nil {
			rejected = append(rejected, Rejected{Index: i, Reason: err.Error()})
			continue
		}
		params, index = append(params, p), append(index, i)
		if !slices.Contains(kinds, p.Kind) {
			kinds = append(kinds, p.Kind)
		}
	}
	for len(params) > 0 {
		_, err := s.client.EnqueueRawKeyed(ctx, params)
		var je *queue.JobError
		if !errors.As(err, &je) {
			if err != nil {
				return nil, fmt.Errorf("bridge: enqueue %d submissions: %w", len(params), err)
			}
			break
		}
		rejected = append(rejected, Rejected{Index: index[je.Index], Reason: je.Err.Error()})
		params, index = slices.Delete(params, je.Index, je.Index+1), slices.Delete(index, je.Index, je.Index+1)
	}
	slices.SortFunc(rejected, func(a, b Rejected) int { return a.Index - b.Index })
	s.mu.Lock()
	s.since += int64(len(params))
	for _, k := range kinds {
		if !slices.Contains(s.kinds, k) {
			s.kinds = append(s.kinds, k)
		}
	}
	s.mu.Unlock()
	return rejected, nil
}

// decodeRequest makes the job of sub.
func decodeRequest(sub Submission) (queue.RawParams, error) {
	var r Request
	dec := json.NewDecoder(bytes.NewReader(sub.Value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return queue.RawParams{}, fmt.Errorf("not a job request: %v", err)
	}
	if r.Kind == "" || len(r.Payload) == 0 {
		return queue.RawParams{}, errors.New("not a job request: kind and payload are required")
	}
	opts := []queue.EnqueueOption{queue.IdempotencyKey(sub.Key)}
	if r.Queue != "" {
		opts = append(opts, queue.OnQueue(r.Queue))
	}
	if r.Priority != 0 {
		opts = append(opts, queue.Priority(r.Priority))
	}
	if r.MaxAttempts != 0 {
		opts = append(opts, queue.MaxAttempts(r.MaxAttempts))
	}
	if r.CorrelationID != "" {
		opts = append(opts, queue.CorrelationID(r.CorrelationID))
	}
	if tp := sub.Headers["traceparent"]; tp != "" {
		opts = append(opts, queue.TraceContext(tp, sub.Headers["tracestate"]))
	}
	return queue.RawParams{Kind: r.Kind, Payload: r.Payload, Options: opts}, nil
}

// Wait returns once fewer than the submitter's maximum of jobs of the
// kinds it has submitted are QUEUED, or when ctx ends (with its error): a
// consumer calls it before each fetch, and so stops fetching while the
// runners are behind. It counts the queued jobs at most once per poll
// interval, since a count reads every queued job of the kinds; in between,
// it adds what was submitted since to the last count, which errs toward
// holding back.
func (s *Submitter) Wait(ctx context.Context) error {
	for {
		s.mu.Lock()
		kinds, since := slices.Clone(s.kinds), s.since
		fresh := !s.countedAt.IsZero() && time.Since(s.countedAt) < s.poll && s.counted+since < s.maxQueued
		s.mu.Unlock()
		if len(kinds) == 0 || fresh {
			return ctx.Err()
		}
		at := time.Now()
		n, err := s.client.Count(ctx, queue.Filter{Kinds: kinds, Statuses: []queue.Status{queue.StatusQueued}})
		if err != nil {
			return fmt.Errorf("bridge: count the queued submissions: %w", err)
		}
		s.mu.Lock()
		s.counted, s.since, s.countedAt = n, s.since-since, at
		s.mu.Unlock()
		if n < s.maxQueued {
			return nil
		}
		t := time.NewTimer(s.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
