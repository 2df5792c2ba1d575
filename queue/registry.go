package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/calendar"
	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/payload"
	"github.com/sheaf-dev/sheaf/queue/internal/runner"
)

// Registry holds the job kinds a Client may enqueue and a Runner may work,
// each with its handler and defaults. Register kinds before starting runners;
// a Registry is safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex
	kinds     map[string]*kindEntry
	rules     runner.RuleSet[childFunc]
	windows   map[string]calendar.Window // by queue
	schedules *runner.ScheduleSet[*schedule]
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{kinds: map[string]*kindEntry{}, schedules: runner.NewScheduleSet[*schedule]()}
}

type kindEntry struct {
	kind     string
	argsType reflect.Type
	plain    bool // argsType is payload.Plain
	defaults jobOptions
	chunked  bool
	// work decodes the job's payload and runs its handler.
	work func(ctx context.Context, a *attempt, e *kindEntry) error
}

// Kinds returns the registered kinds, sorted.
func (r *Registry) Kinds() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.kindsLocked()
}

// ChunkSize returns the records per chunk of a kind registered with
// RegisterChunked, and false for any other kind.
func (r *Registry) ChunkSize(kind string) (int, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e := r.kinds[kind]
	if e == nil || !e.chunked {
		return 0, false
	}
	return e.defaults.chunkSize, true
}

func (r *Registry) lookup(kind string) (*kindEntry, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e := r.kinds[kind]
	if e == nil {
		return nil, fmt.Errorf("%w %q (registered: %v)", ErrUnknownKind, kind, r.kindsLocked())
	}
	return e, nil
}

func (r *Registry) kindsLocked() []string {
	out := slices.AppendSeq(make([]string, 0, len(r.kinds)), maps.Keys(r.kinds))
	slices.Sort(out)
	return out
}

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

func register[A Args](r *Registry, chunked bool, opts []ChunkedOption, work func(context.Context, *attempt, *kindEntry) error) error {
	kind, err := kindOf[A]()
	if err != nil {
		return err
	}
	e := &kindEntry{
		kind:     kind,
		argsType: reflect.TypeFor[A](),
		plain:    payload.Plain(reflect.TypeFor[A]()),
		chunked:  chunked,
		defaults: jobOptions{queue: DefaultQueue, priority: DefaultPriority, maxAttempts: DefaultMaxAttempts, backoff: defaultBackoff, chunkSize: DefaultChunkSize},
		work:     work,
	}
	what := "RegisterOption"
	if chunked {
		what = "ChunkedOption"
	}
	if err := check.Each(what, opts, func(o ChunkedOption) error { return o.applyKind(&e.defaults) }); err != nil {
		return fmt.Errorf("register %q: %w", kind, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kinds[kind] != nil {
		return check.Invalid("kind %q registered twice", kind)
	}
	r.kinds[kind] = e
	return nil
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

// checkPayload refuses a JSON payload given as such (EnqueueRaw) that does
// not decode into the kind's type, or that jsonb would refuse.
func (e *kindEntry) checkPayload(payload []byte) error {
	if err := json.Unmarshal(payload, reflect.New(e.argsType).Interface()); err != nil {
		return fmt.Errorf("%w: kind %q wants %v: %v", ErrInvalidPayload, e.kind, e.argsType, err)
	}
	return check.Raw(payload)
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
	return &runner.Kind{Timeout: e.defaults.timeout, Backoff: e.defaults.backoff, Chunked: e.chunked,
		Work: func(ctx context.Context, ex *runner.Execution) error {
			return e.work(ctx, &attempt{Execution: ex, hooks: k.hooks}, e)
		}}, nil
}

func (k runnerKinds) Closed(now time.Time, queues []string) (map[string]bool, []string) {
	k.c.reg.mu.RLock()
	defer k.c.reg.mu.RUnlock()
	return k.c.reg.windowsLocked().Closed(now, queues)
}

func (k runnerKinds) NextOpening(now time.Time, queues []string) time.Time {
	k.c.reg.mu.RLock()
	defer k.c.reg.mu.RUnlock()
	return k.c.reg.windowsLocked().NextOpening(now, queues)
}
