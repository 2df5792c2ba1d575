package batch

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/sheaf-dev/sheaf/cleanup"
)

// Defaults and limits of the options.
const (
	// DefaultMaxBatchSize is the default largest sub-batch.
	DefaultMaxBatchSize = 5000
	// MaxBatchSizeLimit is the largest value WithMaxBatchSize accepts.
	MaxBatchSizeLimit = 1 << 24

	// DefaultWorkers is the default number of batch IDs processed at once.
	DefaultWorkers = 4
	// MaxWorkers is the largest value WithWorkers accepts.
	MaxWorkers = 4096

	// DefaultQueueCapacityPerWorker is the default queue capacity per
	// worker: WithQueueCapacity(0) means this many sub-batches per worker.
	DefaultQueueCapacityPerWorker = 2
	// MaxQueueCapacity is the largest value WithQueueCapacity accepts.
	MaxQueueCapacity = 1 << 20

	// DefaultCleanupTimeout bounds each cleanup and MarkComplete call.
	DefaultCleanupTimeout = 30 * time.Second
)

// An Option configures a [Coordinator]. Options are built by the With
// functions of this package.
type Option interface {
	apply(*options) error
}

type options struct {
	maxBatchSize   int
	workers        int
	queue          int // 0: 2 × workers
	cleanup        cleanup.Strategy
	cleanupTimeout time.Duration
	logger         *slog.Logger
	observers      []func(Outcome)
	subObservers   []func(SubBatchResult)
	reuse          bool
}

func defaultOptions() options {
	return options{
		maxBatchSize:   DefaultMaxBatchSize,
		workers:        DefaultWorkers,
		cleanup:        cleanup.None(),
		cleanupTimeout: DefaultCleanupTimeout,
		logger:         slog.Default(),
	}
}

type optionFunc func(*options) error

func (f optionFunc) apply(o *options) error { return f(o) }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...)
}

// WithMaxBatchSize sets the largest number of items in one sub-batch, that is
// in one call to Process. Default [DefaultMaxBatchSize]; 1 to
// [MaxBatchSizeLimit].
func WithMaxBatchSize(n int) Option {
	return optionFunc(func(o *options) error {
		if n < 1 || n > MaxBatchSizeLimit {
			return invalid("max batch size %d not in [1, %d]", n, MaxBatchSizeLimit)
		}
		o.maxBatchSize = n
		return nil
	})
}

// WithWorkers sets how many batch IDs are processed at the same time. Size a
// database pool for at least this many connections. Default
// [DefaultWorkers]; 1 to [MaxWorkers].
func WithWorkers(n int) Option {
	return optionFunc(func(o *options) error {
		if n < 1 || n > MaxWorkers {
			return invalid("workers %d not in [1, %d]", n, MaxWorkers)
		}
		o.workers = n
		return nil
	})
}

// WithQueueCapacity sets how many sub-batches may wait for or be in the hands
// of a worker before Send blocks. It is the engine's buffer between producers
// and workers (a blocking queue's capacity), counted in sub-batches
// because that is what holds memory. The engine holds about capacity × max
// batch size items in the queue, plus one sub-batch more per sender that
// filled one at the same moment, plus the unfilled tail of each open batch
// (up to max items each for batches larger than one sub-batch), plus a
// SendMany's own items while it runs. A capacity below the number of workers
// leaves workers idle. Default 0, meaning [DefaultQueueCapacityPerWorker]
// per worker, which keeps every worker busy while the next sub-batches fill;
// 1 to [MaxQueueCapacity] otherwise.
func WithQueueCapacity(n int) Option {
	return optionFunc(func(o *options) error {
		if n < 0 || n > MaxQueueCapacity {
			return invalid("queue capacity %d not in [0, %d]", n, MaxQueueCapacity)
		}
		o.queue = n
		return nil
	})
}

// WithCleanup sets the strategy that removes the partial output of a batch
// that fails or cannot finish, and acknowledges completed ones. Default
// [cleanup.None], which leaves partial output in place.
func WithCleanup(s cleanup.Strategy) Option {
	return optionFunc(func(o *options) error {
		if s == nil {
			return invalid("nil cleanup strategy")
		}
		o.cleanup = s
		return nil
	})
}

// WithCleanupTimeout bounds each call to the cleanup strategy. Cleanup runs
// with a context that a hard stop does not cancel, because it is what keeps a
// batch all-or-nothing; this timeout is what stops it. Default
// [DefaultCleanupTimeout]; must be positive.
func WithCleanupTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) error {
		if d <= 0 {
			return invalid("cleanup timeout %v not positive", d)
		}
		o.cleanupTimeout = d
		return nil
	})
}

// WithLogger sets the logger. The coordinator logs failed batches and failed
// cleanups at Error, incomplete batches and hard stops at Warn, successful
// cleanups at Info, and its lifecycle, batches and sub-batches at Debug; it
// never logs items. Default [slog.Default]. A nil logger discards logs.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(o *options) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		o.logger = l
		return nil
	})
}

// WithObserver adds a function that receives every batch's [Outcome], exactly
// once per batch. It is called from worker goroutines, possibly concurrently,
// so it must be safe for concurrent use; it delays the worker that calls it,
// so it should be quick. A panic or runtime.Goexit in it is recovered and
// logged. Given more than once, every observer is called, in the order given,
// so that telemetry and the application can each have one. A nil f adds
// nothing. Default none.
func WithObserver(f func(Outcome)) Option {
	return optionFunc(func(o *options) error {
		if f != nil {
			o.observers = append(o.observers, f)
		}
		return nil
	})
}

// WithSubBatchObserver adds a function that receives a [SubBatchResult] each
// time a call to Process ends, successfully or not (a panic or
// runtime.Goexit included), before the batch's outcome if the call failed it.
// Sub-batches that never reach Process (skipped after a failure or a stop)
// are not reported. Like an outcome observer, it runs on worker goroutines,
// possibly concurrently, delays the worker, and has its panics recovered and
// logged; given more than once, every observer is called in the order given;
// a nil f adds nothing. When none is set, the engine does not read the clock
// for it. Default none.
func WithSubBatchObserver(f func(SubBatchResult)) Option {
	return optionFunc(func(o *options) error {
		if f != nil {
			o.subObservers = append(o.subObservers, f)
		}
		return nil
	})
}

// Options bundles options into one, applied in the order given, so that a
// package can hand out a set of options as a single Option. Nil options are
// refused by NewCoordinator as they would be on their own.
func Options(opts ...Option) Option {
	return optionFunc(func(o *options) error {
		for _, opt := range opts {
			if opt == nil {
				return invalid("nil Option")
			}
			if err := opt.apply(o); err != nil {
				return err
			}
		}
		return nil
	})
}

// WithBufferReuse makes the coordinator reuse each sub-batch's Items slice for
// a later sub-batch once Process has returned. That removes nearly all of the
// engine's allocation (a 5000-item sub-batch of 32-byte items is 160 KB), and
// with it most garbage-collection work: in our benchmarks Send gains about a
// fifth and SendMany an order of magnitude. Enable it only if the processor
// keeps no reference to Items, or to any part of it, after Process returns:
// reused items are overwritten. Processors that write items to a database and
// return, such as those of package gormbatch, qualify. Default false.
func WithBufferReuse(reuse bool) Option {
	return optionFunc(func(o *options) error {
		o.reuse = reuse
		return nil
	})
}
