package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/access"
	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/enqueue"
	"github.com/sheaf-dev/sheaf/queue/internal/operate"
	"github.com/sheaf-dev/sheaf/queue/internal/registry"
	"github.com/sheaf-dev/sheaf/queue/internal/runner"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Client enqueues and manages jobs. Create one with NewClient; it starts no
// goroutines and is safe for concurrent use. Tx returns a TxClient that does
// the same inside a transaction of the caller's.
type Client struct {
	ops
}

// TxClient enqueues and manages jobs inside a transaction of the caller's,
// as Client.Tx returns it: every call runs in that transaction, and what it
// writes exists if and only if the transaction commits. It has the Client's
// methods but those that do not belong in a caller's transaction: Migrate,
// Migrations and SchemaVersion (the schema), Wait (it polls for other
// transactions' work), Ping and Runners, Activity (which tunes a read-only
// transaction of its own) and Prune (which works in short transactions of
// its own).
type TxClient struct {
	ops
}

// ops holds what Client and TxClient share, and their shared methods.
type ops struct {
	db  *gorm.DB // the pool, or a caller's transaction
	st  store.Store
	reg *Registry
	cfg config
	tx  bool // db is a caller's transaction
}

// NewClient returns a client on db, a gorm handle on PostgreSQL or on an
// SQLite file opened with queue/sqlitedb, for the kinds in reg. Call
// Migrate before use (it is cheap and safe from every process at once).
func NewClient(db *gorm.DB, reg *Registry, opts ...ClientOption) (*Client, error) {
	if db == nil {
		return nil, check.Invalid("nil *gorm.DB")
	}
	if reg == nil {
		return nil, check.Invalid("nil *Registry")
	}
	db = store.Quiet(db)
	st, err := store.Open(db)
	if err != nil {
		return nil, check.Invalid("%v", err)
	}
	cfg := config{logger: slog.Default(), clock: SystemClock{}}
	if err := check.Each("ClientOption", opts, func(o ClientOption) error { return o.applyClient(&cfg) }); err != nil {
		return nil, err
	}
	return &Client{ops{db: db, st: st, reg: reg, cfg: cfg}}, nil
}

// Migrate creates or upgrades the queue's tables to SchemaVersion. It is
// idempotent, and processes that call it at once wait for each other.
func (c *Client) Migrate(ctx context.Context) error {
	return runner.Migrate(ctx, c.st, c.cfg.logger, ErrSchemaTooNew)
}

// Tx returns a client whose calls run inside tx, a transaction of the
// caller's on the client's database; runners are notified at the commit.
// Do not use it after tx ends.
func (c *Client) Tx(tx *gorm.DB) *TxClient {
	return &TxClient{c.in(store.Quiet(tx))}
}

// in returns c's operations inside tx, which has the quiet logger already.
func (c *ops) in(tx *gorm.DB) ops {
	cp := *c
	cp.db, cp.tx = tx, true
	return cp
}

// Enqueued is the result of enqueueing one job.
type Enqueued struct {
	Job *JobRecord
	// Duplicate is true when a job with the same idempotency key existed:
	// Job is that job and nothing was created.
	Duplicate bool
}

// Params describes one job for EnqueueMany and EnqueueBulk.
type Params struct {
	Args    Args
	Options []EnqueueOption
}

// Enqueue stores a job for args's kind. Options override the kind's
// defaults. Errors: ErrUnknownKind; ErrInvalidPayload when args does not
// encode, is not the kind's registered type, or holds text PostgreSQL would
// not store as given (see Guarantees in the package documentation);
// ErrInvalidOption. Nothing is stored when it fails.
func (c *ops) Enqueue(ctx context.Context, args Args, opts ...EnqueueOption) (Enqueued, error) {
	rows, err := c.prepareAll([]Params{{Args: args, Options: opts}})
	if err != nil {
		return Enqueued{}, err
	}
	return c.insertOne(ctx, rows[0])
}

// EnqueueRaw stores a job of kind with a payload given as JSON, as an API
// that accepts jobs from outside would. The payload must decode into the
// kind's registered type, and be what jsonb stores as given (see
// Guarantees in the package documentation). Errors are as for Enqueue.
func (c *ops) EnqueueRaw(ctx context.Context, kind string, payload json.RawMessage, opts ...EnqueueOption) (Enqueued, error) {
	row, err := c.prep().Raw(kind, payload, opts)
	if err != nil {
		return Enqueued{}, err
	}
	return c.insertOne(ctx, row)
}

// insertOne inserts the row of Enqueue or EnqueueRaw.
func (c *ops) insertOne(ctx context.Context, row newJob) (Enqueued, error) {
	out, err := c.insertHooked(ctx, opEnqueue, []newJob{row})
	if err != nil {
		return Enqueued{}, err
	}
	return out[0], nil
}

// EnqueueMany stores jobs in one statement, so they are all created or none
// (duplicates by idempotency key aside, which are returned as such). The
// result is in the order of jobs.
func (c *ops) EnqueueMany(ctx context.Context, jobs []Params) ([]Enqueued, error) {
	rows, err := c.prepareAll(jobs)
	if err != nil {
		return nil, err
	}
	return c.insertHooked(ctx, opEnqueueMany, rows)
}

// RawParams describes one job given as JSON, for EnqueueRawMany.
type RawParams struct {
	Kind    string
	Payload json.RawMessage
	Options []EnqueueOption
}

// JobError is the error of one job of a batch, which failed the batch.
type JobError struct {
	Index int // the job's place in the batch, from 0
	Err   error
}

func (e *JobError) Error() string { return fmt.Sprintf("job %d: %v", e.Index, e.Err) }

// Unwrap returns the job's error.
func (e *JobError) Unwrap() error { return e.Err }

// EnqueueRawMany stores jobs given as JSON in one statement, as
// EnqueueMany stores jobs given as Args: for a service or a broker that
// accepts jobs from outside, many at a time. Each job is checked as
// EnqueueRaw checks it; the first that fails fails the call with a
// *JobError that names it, wrapping the error EnqueueRaw would return, and
// nothing is stored.
func (c *ops) EnqueueRawMany(ctx context.Context, jobs []RawParams) ([]Enqueued, error) {
	rows, err := c.prepareRawAll(jobs)
	if err != nil {
		return nil, err
	}
	return c.insertHooked(ctx, opEnqueueMany, rows)
}

// EnqueueRawKeyed stores jobs as EnqueueRawMany does, in one statement,
// but reads none of them back: it returns only the places in jobs, in
// order, of the duplicates, the jobs whose idempotency key was taken (by
// an existing job, or an earlier one of jobs), which created nothing. It
// is for a consumer of a broker's messages, each keyed by its identity,
// that needs to know only that the jobs are stored before it acknowledges
// them, and would throw the rows away.
// Errors are as for EnqueueRawMany. The Enqueue hooks see an
// EnqueueResult without Enqueued, as for EnqueueBulk.
func (c *ops) EnqueueRawKeyed(ctx context.Context, jobs []RawParams) (duplicates []int, err error) {
	rows, err := c.prepareRawAll(jobs)
	if err != nil {
		return nil, err
	}
	insert := func(ctx context.Context) EnqueueResult {
		duplicates, err = c.st.InsertKeyed(ctx, c.db, rows)
		if err != nil {
			return EnqueueResult{Err: check.Failed(ctx, "enqueue", err)}
		}
		return EnqueueResult{Created: int64(len(rows) - len(duplicates))}
	}
	if len(c.cfg.hooks) == 0 {
		return duplicates, insert(ctx).Err
	}
	res := c.hooked(ctx, opEnqueueMany, rows, insert)
	return duplicates, res.Err
}

// prepareRawAll checks and prepares the jobs of EnqueueRawMany: the first
// that fails fails them all, with a *JobError.
func (c *ops) prepareRawAll(jobs []RawParams) ([]newJob, error) {
	p := c.prep()
	return registry.All(len(jobs), func(i int) (newJob, error) { return p.Raw(jobs[i].Kind, jobs[i].Payload, jobs[i].Options) },
		func(i int, err error) error { return &JobError{Index: i, Err: err} })
}

// insertHooked inserts rows, through the Enqueue hooks if there are any.
func (c *ops) insertHooked(ctx context.Context, op string, rows []newJob) ([]Enqueued, error) {
	if len(c.cfg.hooks) == 0 {
		return c.insert(ctx, rows)
	}
	res := c.hooked(ctx, op, rows, func(ctx context.Context) EnqueueResult { return c.inserted(ctx, rows) })
	return res.Enqueued, res.Err
}

// inserted inserts rows and counts the jobs created.
func (c *ops) inserted(ctx context.Context, rows []newJob) EnqueueResult {
	out, err := c.insert(ctx, rows)
	res := EnqueueResult{Enqueued: out, Err: err}
	for _, e := range out {
		if !e.Duplicate {
			res.Created++
		}
	}
	return res
}

// newJob is a validated job ready to insert.
type newJob = store.NewJob

// prepareAll checks and prepares the jobs of an enqueue call: the first
// that fails fails them all, with its place in the message.
func (c *ops) prepareAll(jobs []Params) ([]newJob, error) {
	p := c.prep()
	return registry.All(len(jobs), func(i int) (newJob, error) { return p.Args(jobs[i].Args, jobs[i].Options) }, registry.Numbered)
}

// prep checks and prepares jobs of the client's kinds.
func (c *ops) prep() registry.Preparer[work, childFunc, *schedule, EnqueueOption] {
	return registry.Preparer[work, childFunc, *schedule, EnqueueOption]{Registry: c.reg.r, Apply: EnqueueOption.applyJob, Unknown: ErrUnknownKind}
}

// prepareStamped prepares the jobs that build returns, as a schedule's tick
// and a dependency rule create them (see registry.Preparer.Stamped).
func (c *ops) prepareStamped(build func() []Params, key func(i int) string, runID, period string) ([]newJob, error) {
	return c.prep().Stamped(func() (int, func(int) (interface{ Kind() string }, []EnqueueOption)) {
		jobs := build()
		return len(jobs), func(i int) (interface{ Kind() string }, []EnqueueOption) { return jobs[i].Args, jobs[i].Options }
	}, key, runID, period)
}

func (c *ops) insert(ctx context.Context, rows []newJob) ([]Enqueued, error) {
	out := make([]Enqueued, len(rows))
	err := enqueue.Insert(ctx, c.st, c.db, rows, func(r *JobRecord) *string { return r.IdempotencyKey },
		func(i int, r *JobRecord, dup bool) { out[i] = Enqueued{Job: r, Duplicate: dup} })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Get returns the job with the given ID, or ErrNotFound.
func (c *ops) Get(ctx context.Context, id int64) (*JobRecord, error) { return c.jobs().Get(ctx, id) }

// Filter selects jobs for List and RetryFailed. Zero fields select
// everything.
type Filter struct {
	Kinds         []string
	Statuses      []Status
	Queue         string
	CorrelationID string
	// RunID selects the jobs of one schedule run (and the jobs they released).
	RunID string
	// Period selects the jobs of a period, such as one night's runs of
	// every schedule (their ticks' local date).
	Period string
	// CreatedAfter and CreatedBefore bound created_at (exclusive).
	CreatedAfter, CreatedBefore time.Time
	// Search selects the jobs whose last error or args (their JSON text)
	// hold it, ignoring case (on SQLite, the case of ASCII letters only).
	// It is matched as it is: % and _ are not wildcards. It reads every
	// row the other fields select, so narrow it on a large table.
	Search string
	// AfterID pages through results: List returns jobs with larger IDs.
	AfterID int64
	// BeforeID pages through results from the newest: List returns jobs
	// with smaller IDs. It goes with Newest.
	BeforeID int64
	// Newest makes List return the newest jobs first, by descending ID.
	Newest bool
	// Limit caps List's results; 0 means 100, the most is 10,000.
	Limit int
}

// List returns the jobs that match f, by ascending ID, or newest first
// with f.Newest.
func (c *ops) List(ctx context.Context, f Filter) ([]JobRecord, error) {
	return c.jobs().List(ctx, operate.Filter[Status](f).Select())
}

// Count counts the jobs that match f; f.AfterID, f.BeforeID, f.Newest and
// f.Limit are ignored. With f.Search it reads every row the other fields
// select.
func (c *ops) Count(ctx context.Context, f Filter) (int64, error) {
	return c.jobs().Count(ctx, operate.Filter[Status](f).Select())
}

// Cancel cancels a QUEUED or PROCESSING job. A running job's context is
// cancelled (with cause ErrCancelled) on the runner that works it, and
// whatever it returns afterwards is ignored. Cancelling a job that is already
// COMPLETED, FAILED or CANCELLED returns an error wrapping ErrWrongStatus.
func (c *ops) Cancel(ctx context.Context, id int64) (*JobRecord, error) {
	return c.transition(ctx, id, "cancel", []string{string(StatusQueued), string(StatusProcessing)}, func(tx *gorm.DB) error {
		_, err := c.st.CancelJobs(tx, store.Filter{IDs: []int64{id}}, 1)
		return err
	})
}

// Retry puts a FAILED or CANCELLED job back in the queue, due now, with as
// many attempts again as it had: a job that failed at 3 of 3 runs next as
// attempt 4 of 6. Other statuses return an error wrapping ErrWrongStatus.
func (c *ops) Retry(ctx context.Context, id int64) (*JobRecord, error) {
	return c.transition(ctx, id, "retry", []string{string(StatusFailed), string(StatusCancelled)}, func(tx *gorm.DB) error {
		return c.st.Retry(tx, id)
	})
}

// RunNow makes a QUEUED job that waits for its run time (a retry's
// backoff, or a job submitted for later) due now, keeping its attempts and
// their limit; a job already due stays as it is. Other statuses return an
// error wrapping ErrWrongStatus.
func (c *ops) RunNow(ctx context.Context, id int64) (*JobRecord, error) {
	return c.transition(ctx, id, "run now", []string{string(StatusQueued)}, func(tx *gorm.DB) error {
		return c.st.RunNow(tx, id)
	})
}

// RetryFailed puts every FAILED job that matches f back in the queue, as
// Retry does, in one statement, and returns how many it requeued. f.Statuses,
// f.AfterID, f.BeforeID, f.Newest and f.Limit are ignored.
func (c *ops) RetryFailed(ctx context.Context, f Filter) (int64, error) {
	f.Statuses = nil
	return c.jobs().RetryFailed(ctx, operate.Filter[Status](f).Select(), maxTotalAttempts)
}

// transition locks a job, checks its status, applies update and returns the
// job as it is afterwards.
func (c *ops) transition(ctx context.Context, id int64, op string, from []string, update func(tx *gorm.DB) error) (*JobRecord, error) {
	return c.jobs().Change(ctx, id, op, from, maxTotalAttempts, update)
}

// maxTotalAttempts bounds a job's attempts over all its retries: the attempt
// number is packed with the job ID in 20 bits (see attemptKey).
const maxTotalAttempts = 1 << 20

// Stats counts the jobs (see Client.Stats for which).
type Stats struct {
	// ByStatus counts jobs by status; ByKind counts them by kind and status.
	ByStatus map[Status]int64
	ByKind   map[string]map[Status]int64
	// Ready counts QUEUED jobs that are due now.
	Ready int64
	// OldestReady is how long the longest-waiting due job has waited; zero
	// if none is due.
	OldestReady time.Duration
}

// Stats counts the jobs: QUEUED and PROCESSING jobs as they stand, and
// finished jobs over the history the day roll-ups keep (a year by default,
// see Retention), pruned or not. Once the maintenance has rolled up a day
// for good, its cost follows the jobs that wait or run and the hour under
// way, not the table: the finished jobs of the days rolled up for good are
// counted from their roll-ups, those of today's final hours from the hour
// roll-ups (before the first day is final, one read of the table counts
// every job). A job retried after its day or hour was rolled up counts
// both where it finished and as it stands now.
func (c *ops) Stats(ctx context.Context) (Stats, error) {
	s, err := operate.ReadStats[Status](ctx, c.st, c.db)
	return Stats(s), err
}

// EnqueueBulk stores many jobs with COPY (on SQLite, prepared multi-row
// INSERTs), the fastest way in: use it for backfills and imports.
// Validation is as for EnqueueMany, and all jobs are stored or none. Jobs
// with idempotency keys cannot be copied (COPY cannot skip duplicates), so a
// bulk that has any goes through EnqueueMany's statement, in slices,
// instead; so does a bulk given to a Client.Tx client, because COPY needs a
// connection of its own. It returns how many jobs it created.
func (c *ops) EnqueueBulk(ctx context.Context, jobs []Params) (int64, error) {
	if len(jobs) > 0 && len(c.cfg.hooks) == 0 && !c.tx {
		// Each job prepared as the copy asks for it, while the server
		// stores those before it. A job with an idempotency key stops the
		// copy, and the bulk goes EnqueueMany's way below.
		p := c.prep()
		n, err := enqueue.Copy(ctx, c.st, len(jobs), func(i int) (newJob, error) {
			r, err := p.Args(jobs[i].Args, jobs[i].Options)
			if err != nil {
				return r, registry.Numbered(i, err)
			}
			return r, nil
		}, c.cfg.logger)
		if !errors.Is(err, enqueue.ErrKeyed) {
			return n, err
		}
	}
	rows, err := c.prepareAll(jobs)
	if err != nil {
		return 0, err
	}
	if len(c.cfg.hooks) == 0 {
		return c.enqueueBulk(ctx, rows)
	}
	res := c.hooked(ctx, opEnqueueBulk, rows, func(ctx context.Context) EnqueueResult {
		n, err := c.enqueueBulk(ctx, rows)
		return EnqueueResult{Created: n, Err: err}
	})
	return res.Created, res.Err
}

func (c *ops) enqueueBulk(ctx context.Context, rows []newJob) (int64, error) {
	// A bulk returns only a count: its slices of keyed jobs read no row back.
	return enqueue.Bulk(ctx, c.st, c.db, rows, c.tx, c.cfg.logger, func(tx *gorm.DB, part []newJob) (int64, error) {
		skipped, err := c.st.InsertKeyed(ctx, tx, part)
		return int64(len(part) - len(skipped)), check.Failed(ctx, "enqueue", err)
	})
}

func init() {
	access.Client = func(client any) (*gorm.DB, store.Store) {
		c := client.(*Client)
		return c.db, c.st
	}
}
