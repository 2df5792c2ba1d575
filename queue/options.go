package queue

import (
	"log/slog"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/option"
)

// Options are sealed, one type per place they are given (see Options in
// the package documentation).

// A ChunkedOption sets a default of a chunked kind, for RegisterChunked:
// every RegisterOption is one, and so is ChunkSize.
type ChunkedOption interface {
	applyKind(*jobOptions) error
}

// A RegisterOption sets a default of a kind, for Register and
// RegisterChunked.
type RegisterOption interface {
	ChunkedOption
	registerOption()
}

// An EnqueueOption sets something about one job, for Enqueue, EnqueueRaw,
// Params and dependency rules' children. It overrides the kind's default.
type EnqueueOption interface {
	applyJob(*jobOptions) error
}

// A JobOption sets something a kind has by default and a job may override:
// it is both a RegisterOption and an EnqueueOption. OnQueue, Priority,
// MaxAttempts and RetryBackoff return one.
type JobOption struct {
	apply func(o *jobOptions, job bool) error
}

func (j JobOption) applyKind(o *jobOptions) error { return j.call(o, false) }
func (j JobOption) applyJob(o *jobOptions) error  { return j.call(o, true) }
func (JobOption) registerOption()                 {}

func (j JobOption) call(o *jobOptions, job bool) error {
	if j.apply == nil {
		return check.Invalid("zero JobOption")
	}
	return j.apply(o, job)
}

// kindOption is a RegisterOption only.
type kindOption func(*jobOptions) error

func (f kindOption) applyKind(o *jobOptions) error { return f(o) }
func (kindOption) registerOption()                 {}

// chunkedOption is a ChunkedOption only.
type chunkedOption func(*jobOptions) error

func (f chunkedOption) applyKind(o *jobOptions) error { return f(o) }

// enqueueOption is an EnqueueOption only.
type enqueueOption func(*jobOptions) error

func (f enqueueOption) applyJob(o *jobOptions) error { return f(o) }

// jobOptions are a kind's defaults, or a job's settings.
type jobOptions = option.Job

// OnQueue puts jobs on the named queue (kind or job): 1 to 128 bytes of
// UTF-8 without NUL. Runners work the queues given to WithQueues. Default
// DefaultQueue.
func OnQueue(name string) JobOption {
	return JobOption{func(o *jobOptions, _ bool) error { return o.SetQueue(name) }}
}

// Priority sets the priority, MinPriority to MaxPriority; higher runs first
// (kind or job). Default DefaultPriority.
func Priority(p int) JobOption {
	return JobOption{func(o *jobOptions, _ bool) error { return o.SetPriority(p, MinPriority, MaxPriority) }}
}

// MaxAttempts sets how many times a job runs before it fails, counting the
// first run (kind or job). Default DefaultMaxAttempts; 1 to 1000.
func MaxAttempts(n int) JobOption {
	return JobOption{func(o *jobOptions, _ bool) error { return o.SetMaxAttempts(n) }}
}

// RetryBackoff sets the backoff between attempts (kind or job). A kind may
// use any Backoff; a job's own must be Exponential, Linear or Delays,
// because it is stored with the job (another is refused at Enqueue with
// ErrInvalidOption). Default DefaultBackoff().
func RetryBackoff(b Backoff) JobOption {
	return JobOption{func(o *jobOptions, job bool) error {
		if err := validBackoff(b); err != nil {
			return err
		}
		if job {
			var err error
			if o.OwnBackoff, err = encodeBackoff(b); err != nil {
				return err
			}
		}
		o.Backoff = b
		return nil
	}}
}

// Timeout bounds each attempt of the kind's jobs: the job's context is
// cancelled when it passes and the attempt fails. Default none.
func Timeout(d time.Duration) RegisterOption {
	return kindOption(func(o *jobOptions) error { return o.SetTimeout(d) })
}

// ChunkSize sets how many records a chunked kind processes per chunk, that
// is per transaction and progress update. Default DefaultChunkSize; 1 to
// MaxChunkSize.
func ChunkSize(n int) ChunkedOption {
	return chunkedOption(func(o *jobOptions) error { return o.SetChunkSize(n, MaxChunkSize) })
}

// RunAt makes the job wait until t.
func RunAt(t time.Time) EnqueueOption {
	return enqueueOption(func(o *jobOptions) error { return o.SetRunAt(t) })
}

// After makes the job wait d, measured on the database's clock.
func After(d time.Duration) EnqueueOption {
	return enqueueOption(func(o *jobOptions) error { return o.SetDelay(d) })
}

// IdempotencyKey makes the job unique by key: enqueueing a second job with
// the same key creates nothing and returns the existing job, whatever its
// status. A key has 1 to 512 bytes of UTF-8 without NUL.
func IdempotencyKey(key string) EnqueueOption {
	return enqueueOption(func(o *jobOptions) error { return o.SetKey(key) })
}

// CorrelationID tags the job for tracing; it appears in the job's logs. An
// ID has up to 512 bytes of UTF-8 without NUL.
func CorrelationID(id string) EnqueueOption {
	return enqueueOption(func(o *jobOptions) error { return o.SetCorrelation(id) })
}

// AuthContext stores the submitter's claims with the job; see Auth. Claims
// are stored as JSON: claims that do not encode are refused with
// ErrInvalidOption, and strings in them (keys and values, at any depth)
// that are not UTF-8 or hold a NUL with ErrInvalidPayload.
func AuthContext(a Auth) EnqueueOption {
	return enqueueOption(func(o *jobOptions) error { return o.SetAuth(a) })
}

// InRun puts the job in a run, as a schedule tick does with the jobs it
// creates; the morning review reports runs.
func InRun(runID string) EnqueueOption {
	return enqueueOption(func(o *jobOptions) error { return o.SetRunID(runID) })
}

// InPeriod puts the job in a period, as a schedule tick does with its local
// date; dependency rules group parents by period.
func InPeriod(period string) EnqueueOption {
	return enqueueOption(func(o *jobOptions) error { return o.SetPeriod(period) })
}

// TraceContext stores the W3C trace context (traceparent, tracestate) of
// the request that submitted the job, which its attempts then link to, and
// which Hooks that enqueue in a trace of their own take as its parent: 1 to
// 256 and up to 512 bytes (empty for none) of UTF-8 without NUL.
func TraceContext(traceparent, tracestate string) EnqueueOption {
	return enqueueOption(func(o *jobOptions) error { return o.SetTrace(traceparent, tracestate) })
}

// Defaults and limits of the client, runner and chunk options.
const (
	DefaultWorkers      = 100
	MaxWorkers          = 10_000
	DefaultPollInterval = time.Second
	DefaultLease        = 30 * time.Second
	DefaultChunkSize    = 1000
	MaxChunkSize        = 1 << 24
)

// A ClientOption configures NewClient. WithLogger, WithObserver, WithHooks
// and WithClock return one.
type ClientOption interface {
	applyClient(*config) error
}

// A RunnerOption configures NewRunner. The With options return one.
type RunnerOption interface {
	applyRunner(*config) error
}

// An InstrumentOption sets what a client or a runner reports, and to whom:
// WithLogger, WithObserver and WithHooks return one. It is both a
// ClientOption and a RunnerOption; a runner starts from its client's.
type InstrumentOption struct {
	apply func(*config) error
}

func (o InstrumentOption) applyClient(c *config) error { return o.call(c) }
func (o InstrumentOption) applyRunner(c *config) error { return o.call(c) }

func (o InstrumentOption) call(c *config) error {
	if o.apply == nil {
		return check.Invalid("zero InstrumentOption")
	}
	return o.apply(c)
}

// runnerOption is a RunnerOption only.
type runnerOption func(*config) error

func (f runnerOption) applyRunner(c *config) error { return f(c) }

// config is a client's or a runner's settings: package option's runner
// settings, and those whose types this package declares.
type config struct {
	option.Runner
	logger    *slog.Logger
	observer  Observer
	clock     Clock
	hooks     []Hooks
	retention Retention // retention.go
}

// WithLogger sets the logger (client or runner; a runner uses its client's
// unless given its own). Jobs are logged with their ID, kind, attempt and
// correlation ID, never their payload or auth context. Default slog.Default;
// nil discards.
func WithLogger(l *slog.Logger) InstrumentOption {
	return InstrumentOption{func(c *config) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		c.logger = l
		return nil
	}}
}

// WithObserver sets the observer of job events (client or runner; a runner
// uses its client's unless given its own). Default none.
func WithObserver(o Observer) InstrumentOption {
	return InstrumentOption{func(c *config) error {
		c.observer = o
		return nil
	}}
}

// WithWorkers sets how many jobs a runner works at once. Default
// DefaultWorkers; 1 to MaxWorkers. With two or more workers a runner also
// claims ahead what they will likely finish while a claim is on its way
// (workers × claim time ÷ job time, at most as many again as it has
// workers; behind a server more than 10 ms away, what they finish in a
// round trip, up to 400 per worker, so that the round trip is paid per
// claim, not per job); a job claimed ahead that waits 100 ms plus two
// claims' time for a worker goes back.
func WithWorkers(n int) RunnerOption {
	return runnerOption(func(c *config) error { return c.SetWorkers(n, MaxWorkers) })
}

// WithQueues sets the queues a runner works; names are as for OnQueue.
// Default DefaultQueue.
func WithQueues(names ...string) RunnerOption {
	return runnerOption(func(c *config) error { return c.SetQueues(names) })
}

// WithPollInterval sets how often a runner looks for jobs when no
// notification woke it: the fallback for lost notifications and for jobs
// whose run time arrives. Default DefaultPollInterval; 10ms to 1h.
func WithPollInterval(d time.Duration) RunnerOption {
	return runnerOption(func(c *config) error { return c.SetPoll(d) })
}

// WithLease sets how long a claimed job stays a runner's without renewal.
// The runner renews it every third of that while the job runs; if the
// runner dies, the job is rescued once the lease expires. Default
// DefaultLease; 500ms to 24h.
func WithLease(d time.Duration) RunnerOption {
	return runnerOption(func(c *config) error { return c.SetLease(d) })
}

// WithRescueInterval sets how often a runner looks for expired leases to
// rescue while it leads the maintenance. Default half the lease; 10ms to 24h.
func WithRescueInterval(d time.Duration) RunnerOption {
	return runnerOption(func(c *config) error { return c.SetRescueEvery(d) })
}

// WithRunnerID names the runner in the jobs it locks: 1 to 200 bytes of
// UTF-8 without NUL. Default hostname, process ID and a random suffix.
func WithRunnerID(id string) RunnerOption {
	return runnerOption(func(c *config) error { return c.SetID(id) })
}

// WithClock sets the clock that schedules and windows go by (client or
// runner; a runner uses its client's unless given its own): a runner fires
// ticks by it, and a client's ScheduleStates, Review and Clock read it.
// Runs, leases and retries keep the database's clock. Default SystemClock{}.
func WithClock(c Clock) ClockOption { return ClockOption{c} }

// A ClockOption sets the clock of a client or a runner: WithClock returns
// one. It is both a ClientOption and a RunnerOption.
type ClockOption struct{ c Clock }

func (o ClockOption) applyClient(cfg *config) error { return o.apply(cfg) }
func (o ClockOption) applyRunner(cfg *config) error { return o.apply(cfg) }

func (o ClockOption) apply(cfg *config) error {
	return check.Set(&cfg.clock, o.c, check.Refuse(o.c == nil, "nil Clock"))
}
