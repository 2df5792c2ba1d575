package queue

import (
	"log/slog"
	"time"
)

// A JobOption sets something about a job. Options marked "kind or job" can
// be given to Register (a default for the kind) or to Enqueue (for one job,
// overriding the kind's); the others only where their doc says.
type JobOption interface {
	applyJob(*jobOptions, optionSite) error
}

type optionSite int

const (
	atRegister optionSite = iota
	atEnqueue
)

func (s optionSite) String() string {
	if s == atRegister {
		return "Register"
	}
	return "Enqueue"
}

type jobOptions struct {
	queue          string
	priority       int
	maxAttempts    int
	backoff        Backoff
	ownBackoff     bool // set at enqueue: stored with the job
	timeout        time.Duration
	chunkSize      int
	runAt          time.Time
	delay          time.Duration
	idempotencyKey string
	correlationID  string
	auth           Auth
	runID          string
	period         string
	window         Window
	traceParent    string
	traceState     string
}

type jobOptionFunc func(*jobOptions, optionSite) error

func (f jobOptionFunc) applyJob(o *jobOptions, s optionSite) error { return f(o, s) }

func only(name string, want, got optionSite, f func() error) error {
	if want != got {
		return invalid("%s applies to %s, not %s", name, want, got)
	}
	return f()
}

// OnQueue puts jobs on the named queue (kind or job): 1 to 128 bytes of
// UTF-8 without NUL. Runners work the queues given to WithQueues. Default
// DefaultQueue.
func OnQueue(name string) JobOption {
	return jobOptionFunc(func(o *jobOptions, _ optionSite) error {
		if err := checkQueueName("OnQueue", name); err != nil {
			return err
		}
		o.queue = name
		return nil
	})
}

// Priority sets the priority, MinPriority to MaxPriority; higher runs first
// (kind or job). Default DefaultPriority.
func Priority(p int) JobOption {
	return jobOptionFunc(func(o *jobOptions, _ optionSite) error {
		if p < MinPriority || p > MaxPriority {
			return invalid("priority %d not in [%d, %d]", p, MinPriority, MaxPriority)
		}
		o.priority = p
		return nil
	})
}

// MaxAttempts sets how many times a job runs before it fails, counting the
// first run (kind or job). Default DefaultMaxAttempts; 1 to 1000.
func MaxAttempts(n int) JobOption {
	return jobOptionFunc(func(o *jobOptions, _ optionSite) error {
		if n < 1 || n > 1000 {
			return invalid("max attempts %d not in [1, 1000]", n)
		}
		o.maxAttempts = n
		return nil
	})
}

// Retry sets the backoff between attempts (kind or job). A kind may use any
// Backoff; a job's own must be Exponential, Linear or Delays, because it is
// stored with the job. Default DefaultBackoff.
func Retry(b Backoff) JobOption {
	return jobOptionFunc(func(o *jobOptions, s optionSite) error {
		if err := validBackoff(b); err != nil {
			return err
		}
		if s == atEnqueue {
			if _, err := encodeBackoff(b); err != nil {
				return err
			}
			o.ownBackoff = true
		}
		o.backoff = b
		return nil
	})
}

// Timeout bounds each attempt of the kind's jobs (Register only): the job's
// context is cancelled when it passes and the attempt fails. Default none.
func Timeout(d time.Duration) JobOption {
	return jobOptionFunc(func(o *jobOptions, s optionSite) error {
		return only("Timeout", atRegister, s, func() error {
			if d <= 0 {
				return invalid("timeout %v not positive", d)
			}
			o.timeout = d
			return nil
		})
	})
}

// ChunkSize sets how many records a chunked kind processes per chunk, that
// is per transaction and progress update (RegisterChunked only). Default
// DefaultChunkSize.
func ChunkSize(n int) JobOption {
	return jobOptionFunc(func(o *jobOptions, s optionSite) error {
		return only("ChunkSize", atRegister, s, func() error {
			if n < 1 || n > 1<<24 {
				return invalid("chunk size %d not in [1, %d]", n, 1<<24)
			}
			o.chunkSize = n
			return nil
		})
	})
}

// RunAt makes the job wait until t (Enqueue only).
func RunAt(t time.Time) JobOption {
	return jobOptionFunc(func(o *jobOptions, s optionSite) error {
		return only("RunAt", atEnqueue, s, func() error {
			if t.IsZero() {
				return invalid("zero RunAt time")
			}
			o.runAt = t
			return nil
		})
	})
}

// After makes the job wait d, measured on the database's clock (Enqueue only).
func After(d time.Duration) JobOption {
	return jobOptionFunc(func(o *jobOptions, s optionSite) error {
		return only("After", atEnqueue, s, func() error {
			if d < 0 {
				return invalid("negative delay %v", d)
			}
			o.delay = d
			return nil
		})
	})
}

// IdempotencyKey makes the job unique by key (Enqueue only): enqueueing a
// second job with the same key creates nothing and returns the existing job,
// whatever its status. A key has 1 to 512 bytes of UTF-8 without NUL.
func IdempotencyKey(key string) JobOption {
	return jobOptionFunc(func(o *jobOptions, s optionSite) error {
		return only("IdempotencyKey", atEnqueue, s, func() error {
			if key == "" || len(key) > 512 {
				return invalid("idempotency key must have 1 to 512 bytes")
			}
			if err := checkText("IdempotencyKey", key); err != nil {
				return err
			}
			o.idempotencyKey = key
			return nil
		})
	})
}

// CorrelationID tags the job for tracing; it appears in the job's logs
// (Enqueue only). An ID has up to 512 bytes of UTF-8 without NUL.
func CorrelationID(id string) JobOption {
	return jobOptionFunc(func(o *jobOptions, s optionSite) error {
		return only("CorrelationID", atEnqueue, s, func() error {
			if len(id) > 512 {
				return invalid("correlation ID longer than 512 bytes")
			}
			if err := checkText("CorrelationID", id); err != nil {
				return err
			}
			o.correlationID = id
			return nil
		})
	})
}

// AuthContext stores the submitter's claims with the job (Enqueue only); see
// Auth. Claims are stored as JSON: claims that do not encode are refused
// with ErrInvalidOption, and strings in them (keys and values, at any depth)
// that are not UTF-8 or hold a NUL with ErrInvalidPayload.
func AuthContext(a Auth) JobOption {
	return jobOptionFunc(func(o *jobOptions, s optionSite) error {
		return only("AuthContext", atEnqueue, s, func() error {
			o.auth = a
			return nil
		})
	})
}

// InRun puts the job in a run (Enqueue only), as a schedule tick does with
// the jobs it creates; the morning review reports runs.
func InRun(runID string) JobOption {
	return jobOptionFunc(func(o *jobOptions, s optionSite) error {
		return only("InRun", atEnqueue, s, func() error {
			if runID == "" || len(runID) > 512 {
				return invalid("run ID must have 1 to 512 bytes")
			}
			if err := checkText("InRun", runID); err != nil {
				return err
			}
			o.runID = runID
			return nil
		})
	})
}

// InPeriod puts the job in a period (Enqueue only), as a schedule tick does
// with its local date; dependency rules group parents by period.
func InPeriod(period string) JobOption {
	return jobOptionFunc(func(o *jobOptions, s optionSite) error {
		return only("InPeriod", atEnqueue, s, func() error {
			if period == "" || len(period) > 128 {
				return invalid("period must have 1 to 128 bytes")
			}
			if err := checkText("InPeriod", period); err != nil {
				return err
			}
			o.period = period
			return nil
		})
	})
}

// TraceContext stores a W3C trace context with the job (Enqueue only), the
// traceparent and tracestate headers of the request that submitted it, as
// queue/console does: the job's attempts then link to that trace. A
// traceparent has 1 to 256 bytes, a tracestate up to 512 (empty for none),
// both UTF-8 without NUL. Hooks that enqueue in a trace of their own (see
// Hooks.Enqueue) take it as the parent of theirs.
func TraceContext(traceparent, tracestate string) JobOption {
	return jobOptionFunc(func(o *jobOptions, s optionSite) error {
		return only("TraceContext", atEnqueue, s, func() error {
			if traceparent == "" || len(traceparent) > 256 || len(tracestate) > 512 {
				return invalid("traceparent must have 1 to 256 bytes and tracestate at most 512")
			}
			if err := checkText("TraceContext", traceparent); err != nil {
				return err
			}
			if err := checkText("TraceContext", tracestate); err != nil {
				return err
			}
			o.traceParent, o.traceState = traceparent, tracestate
			return nil
		})
	})
}

func applyJobOptions(o *jobOptions, site optionSite, opts []JobOption) error {
	for _, opt := range opts {
		if opt == nil {
			return invalid("nil JobOption")
		}
		if err := opt.applyJob(o, site); err != nil {
			return err
		}
	}
	return nil
}

// Defaults of the client and runner options.
const (
	DefaultWorkers      = 100
	MaxWorkers          = 10_000
	DefaultPollInterval = time.Second
	DefaultLease        = 30 * time.Second
	DefaultChunkSize    = 1000
)

// An Option configures a Client (NewClient) or a Runner (NewRunner). Each
// option's doc says which it applies to; giving NewClient a runner option is
// an error.
type Option interface {
	apply(*config) error
}

type config struct {
	logger        *slog.Logger
	observer      Observer
	workers       int
	queues        []string
	poll          time.Duration
	lease         time.Duration
	rescueEvery   time.Duration
	runnerID      string
	clock         Clock
	hooks         []Hooks
	runnerOptions []string // names of runner options given, to reject them at NewClient
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

func runnerOption(name string, f func(*config) error) Option {
	return optionFunc(func(c *config) error {
		c.runnerOptions = append(c.runnerOptions, name)
		return f(c)
	})
}

// WithLogger sets the logger (client or runner; a runner uses its client's
// unless given its own). Jobs are logged with their ID, kind, attempt and
// correlation ID, never their payload or auth context. Default slog.Default;
// nil discards.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		c.logger = l
		return nil
	})
}

// WithObserver sets the observer of job events (client or runner; a runner
// uses its client's unless given its own). Default none.
func WithObserver(o Observer) Option {
	return optionFunc(func(c *config) error {
		c.observer = o
		return nil
	})
}

// WithWorkers sets how many jobs a runner works at once (runner). Default
// DefaultWorkers; 1 to MaxWorkers. A runner with two or more workers also
// claims ahead of need as many jobs as its workers will likely finish while
// a claim is on its way (workers × claim time ÷ job time, at most as many
// again as it has workers), so that its workers do not wait for the
// database; a job claimed ahead that waits 100 ms for a worker goes back to
// the queue. A runner with one worker holds one job at a time.
func WithWorkers(n int) Option {
	return runnerOption("WithWorkers", func(c *config) error {
		if n < 1 || n > MaxWorkers {
			return invalid("workers %d not in [1, %d]", n, MaxWorkers)
		}
		c.workers = n
		return nil
	})
}

// WithQueues sets the queues a runner works (runner); names are as for
// OnQueue. Default DefaultQueue.
func WithQueues(names ...string) Option {
	return runnerOption("WithQueues", func(c *config) error {
		if len(names) == 0 {
			return invalid("WithQueues needs at least one queue")
		}
		for _, n := range names {
			if err := checkQueueName("WithQueues", n); err != nil {
				return err
			}
		}
		c.queues = append([]string(nil), names...)
		return nil
	})
}

// WithPollInterval sets how often a runner looks for jobs when no
// notification woke it (runner): the fallback for lost notifications and for
// jobs whose run time arrives. Default DefaultPollInterval; 10ms to 1h.
func WithPollInterval(d time.Duration) Option {
	return runnerOption("WithPollInterval", func(c *config) error {
		if d < 10*time.Millisecond || d > time.Hour {
			return invalid("poll interval %v not in [10ms, 1h]", d)
		}
		c.poll = d
		return nil
	})
}

// WithLease sets how long a claimed job stays a runner's without renewal
// (runner). The runner renews it every third of that while the job runs; if
// the runner dies, the job is rescued once the lease expires. Default
// DefaultLease; 500ms to 24h.
func WithLease(d time.Duration) Option {
	return runnerOption("WithLease", func(c *config) error {
		if d < 500*time.Millisecond || d > 24*time.Hour {
			return invalid("lease %v not in [500ms, 24h]", d)
		}
		c.lease = d
		return nil
	})
}

// WithRescueInterval sets how often a runner looks for expired leases to
// rescue (runner). Default half the lease.
func WithRescueInterval(d time.Duration) Option {
	return runnerOption("WithRescueInterval", func(c *config) error {
		if d < 10*time.Millisecond || d > 24*time.Hour {
			return invalid("rescue interval %v not in [10ms, 24h]", d)
		}
		c.rescueEvery = d
		return nil
	})
}

// WithRunnerID names the runner in the jobs it locks (runner): 1 to 200
// bytes of UTF-8 without NUL. Default hostname, process ID and a random
// suffix.
func WithRunnerID(id string) Option {
	return runnerOption("WithRunnerID", func(c *config) error {
		if id == "" || len(id) > 200 {
			return invalid("runner ID must have 1 to 200 bytes")
		}
		if err := checkText("WithRunnerID", id); err != nil {
			return err
		}
		c.runnerID = id
		return nil
	})
}

// WithClock sets the clock that schedules and windows go by (runner). Runs,
// leases and retries keep the database's clock. Default SystemClock; tests
// and demonstrations pass one they control.
func WithClock(c Clock) Option {
	return runnerOption("WithClock", func(cfg *config) error {
		if c == nil {
			return invalid("nil Clock")
		}
		cfg.clock = c
		return nil
	})
}

func applyOptions(c *config, opts []Option) error {
	for _, opt := range opts {
		if opt == nil {
			return invalid("nil Option")
		}
		if err := opt.apply(c); err != nil {
			return err
		}
	}
	return nil
}
