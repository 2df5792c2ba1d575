package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/calendar"
	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/maintain"
	"github.com/sheaf-dev/sheaf/queue/internal/payload"
	"github.com/sheaf-dev/sheaf/queue/internal/registry"
	"github.com/sheaf-dev/sheaf/queue/internal/runner"
)

// Registry holds the job kinds a Client may enqueue and a Runner may work,
// each with its handler and defaults. Register kinds before starting runners;
// a Registry is safe for concurrent use.
type Registry struct {
	r *registry.Registry[jobOptions, work, childFunc, *schedule]
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{registry.New[jobOptions, work, childFunc, *schedule](func(o jobOptions) calendar.Window { return o.Window })}
}

// kindEntry is a registered kind.
type kindEntry = registry.Kind[jobOptions, work]

// work decodes a job's payload and runs its handler.
type work func(ctx context.Context, a *attempt, e *kindEntry) error

// Kinds returns the registered kinds, sorted.
func (r *Registry) Kinds() []string { return r.r.Kinds() }

// ChunkSize returns the records per chunk of a kind registered with
// RegisterChunked, and false for any other kind.
func (r *Registry) ChunkSize(kind string) (int, bool) {
	e, err := r.lookup(kind)
	if err != nil || !e.Chunked {
		return 0, false
	}
	return e.Defaults.ChunkSize, true
}

func (r *Registry) lookup(kind string) (*kindEntry, error) { return r.r.Lookup(kind, ErrUnknownKind) }

// Register registers h as the handler of the kind named by A's Kind method.
// opts set the kind's defaults (OnQueue, Priority, MaxAttempts,
// RetryBackoff, Timeout, During). It returns an error wrapping
// ErrInvalidOption for a kind registered twice, a kind name that is not 1
// to 200 bytes of UTF-8 without NUL, or a bad option.
func Register[A Args](r *Registry, h Handler[A], opts ...RegisterOption) error {
	if h == nil {
		return check.Invalid("nil handler")
	}
	if f, ok := h.(HandlerFunc[A]); ok && f == nil {
		return check.Invalid("nil HandlerFunc")
	}
	// RegisterChunked's options include Register's.
	kindOpts := converted(opts, func(o RegisterOption) ChunkedOption { return o })
	return register[A](r, false, kindOpts, func(ctx context.Context, a *attempt, _ *kindEntry) error {
		job, err := decodeJob[A](a.Row(), a)
		if err != nil {
			return err
		}
		return h.Work(ctx, job)
	})
}

func register[A Args](r *Registry, chunked bool, opts []ChunkedOption, w work) error {
	kind, err := kindOf[A]()
	if err != nil {
		return err
	}
	e := registry.NewKind[A](kind, chunked, jobOptions{Queue: DefaultQueue, Priority: DefaultPriority,
		MaxAttempts: DefaultMaxAttempts, ChunkSize: DefaultChunkSize, Backoff: defaultBackoff}, w)
	what := "RegisterOption"
	if chunked {
		what = "ChunkedOption"
	}
	if err := check.Each(what, opts, func(o ChunkedOption) error { return o.applyKind(&e.Defaults) }); err != nil {
		return fmt.Errorf("register %q: %w", kind, err)
	}
	return r.r.Add(e)
}

// kindOf asks the zero A for its kind, so a kind is known without a value.
func kindOf[A Args]() (string, error) {
	kind, flaw := payload.KindOf[A]()
	return kind, check.Refuse(flaw != "", "%s", flaw)
}

// decodeJob builds the handler's Job from a claimed row, run by ex. A
// payload that does not decode can never succeed, so the error is
// permanent.
func decodeJob[A Args](row *runner.Row, ex execution) (*Job[A], error) {
	var args A
	if err := json.Unmarshal(row.Payload, &args); err != nil {
		return nil, Permanent(fmt.Errorf("%w: kind %q: %v", ErrInvalidPayload, row.Kind, err))
	}
	return &Job[A]{
		ID: row.ID, Kind: row.Kind, Queue: row.Queue, Args: args, Priority: row.Priority,
		Attempt: row.Attempts, MaxAttempts: row.MaxAttempts, Auth: row.Auth, CreatedAt: row.CreatedAt,
		CorrelationID: deref(row.CorrelationID), StartedAt: deref(row.StartedAt), RunID: deref(row.RunID),
		Period: deref(row.Period), ParentIDs: row.ParentIDs, exec: ex,
	}, nil
}

// deref returns *p, or the zero value for nil.
func deref[T any](p *T) (v T) {
	if p != nil {
		v = *p
	}
	return v
}

// runnerKinds shows a runner the registry's kinds and windows (see
// runner.Kinds). The kinds it looks up run their jobs with the hooks of
// that runner, which keeps what it looked up.
type runnerKinds struct {
	c     *Client
	hooks []Hooks
}

func (k runnerKinds) Lookup(kind string) (*runner.Kind, error) {
	e, err := k.c.reg.lookup(kind)
	if err != nil {
		return nil, err
	}
	return &runner.Kind{Timeout: e.Defaults.Timeout, Backoff: e.Defaults.Backoff, Chunked: e.Chunked,
		Work: func(ctx context.Context, ex *runner.Execution) error {
			return e.Work(ctx, &attempt{Execution: ex, hooks: k.hooks}, e)
		}}, nil
}

func (k runnerKinds) Closed(now time.Time, queues []string) (map[string]bool, []string) {
	return k.c.reg.r.Closed(now, queues)
}

func (k runnerKinds) NextOpening(now time.Time, queues []string) time.Time {
	return k.c.reg.r.NextOpening(now, queues)
}

// retained yields the kinds' own retentions, holding the registry's lock.
func (r *Registry) retained(yield func(string, maintain.Durations) bool) {
	for kind, e := range r.r.All {
		if !yield(kind, e.Defaults.Retain) {
			return
		}
	}
}
