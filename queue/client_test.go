package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
)

func nopHandler[A queue.Args]() queue.Handler[A] {
	return queue.HandlerFunc[A](func(context.Context, *queue.Job[A]) error { return nil })
}

// basic registers noop and report handlers that do nothing.
func basic(t *testing.T) func(*queue.Registry) {
	return func(r *queue.Registry) {
		require.NoError(t, queue.Register(r, nopHandler[noop]()))
		require.NoError(t, queue.Register(r, nopHandler[report](), queue.Priority(7), queue.MaxAttempts(5)))
	}
}

func TestMigrateIsIdempotentAndSafeConcurrently(t *testing.T) {
	pgtest.PostgresOnly(t, "it reads pg_tables")
	t.Parallel()
	e := newEnv(t, basic(t))
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() {
			c, err := queue.NewClient(e.db.Gorm, e.reg, quiet())
			if err == nil {
				err = c.Migrate(context.Background())
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int64(queue.SchemaVersion), e.db.Count(t, "SELECT count(*) FROM sheaf_migrations"))
	require.Equal(t, int64(1), e.db.Count(t, "SELECT count(*) FROM pg_tables WHERE tablename = 'sheaf_jobs' AND schemaname = current_schema()"))
}

func TestMigrateRefusesANewerSchema(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	require.NoError(t, e.db.Gorm.Exec("INSERT INTO sheaf_migrations (version) VALUES (?)", queue.SchemaVersion+1).Error)
	require.ErrorIs(t, e.client.Migrate(context.Background()), queue.ErrSchemaTooNew)
}

func TestNewClientChecksItsArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	_, err := queue.NewClient(nil, e.reg)
	require.ErrorIs(t, err, queue.ErrInvalidOption)
	_, err = queue.NewClient(e.db.Gorm, nil)
	require.ErrorIs(t, err, queue.ErrInvalidOption)
	_, err = queue.NewClient(e.db.Gorm, e.reg, nil)
	require.EqualError(t, err, "queue: invalid option: nil ClientOption")
	_, err = queue.NewClient(e.db.Gorm, e.reg, queue.InstrumentOption{})
	require.EqualError(t, err, "queue: invalid option: zero InstrumentOption")
}

type pointerArgs struct{ X int }

func (*pointerArgs) Kind() string { return "pointer" }

type derefArgs struct{ Name string }

func (d *derefArgs) Kind() string { return d.Name } // panics on the zero (nil) value

type emptyKind struct{}

func (emptyKind) Kind() string { return "" }

func TestRegisterChecksItsArguments(t *testing.T) {
	t.Parallel()
	r := queue.NewRegistry()
	require.NoError(t, queue.Register(r, nopHandler[noop]()))
	for name, err := range map[string]error{
		"twice":        queue.Register(r, nopHandler[noop]()),
		"nil handler":  queue.Register[report](r, nil),
		"nil func":     queue.Register(r, queue.HandlerFunc[report](nil)),
		"empty kind":   queue.Register(r, nopHandler[emptyKind]()),
		"deref kind":   queue.Register(r, nopHandler[*derefArgs]()),
		"bad priority": queue.Register(r, nopHandler[report](), queue.Priority(11)),
		"nil option":   queue.Register(r, nopHandler[report](), nil),
		"zero option":  queue.Register(r, nopHandler[report](), queue.JobOption{}),
		"bad backoff":  queue.Register(r, nopHandler[report](), queue.RetryBackoff(queue.Exponential{})),
	} {
		require.ErrorIs(t, err, queue.ErrInvalidOption, name)
	}
	require.Equal(t, []string{"noop"}, r.Kinds(), "failed registrations leave nothing behind")
	require.NoError(t, queue.Register(r, nopHandler[*pointerArgs]()), "pointer payloads work when Kind does not dereference")
}

func TestEnqueueStoresTheJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	res, err := e.client.Enqueue(ctx, report{County: "Travis"},
		queue.Priority(9), queue.MaxAttempts(4), queue.CorrelationID("req-42"),
		queue.AuthContext(queue.Auth{"role": "SUPERVISOR", "counties": []any{"Travis"}}),
		queue.RetryBackoff(queue.Delays{time.Minute}))
	require.NoError(t, err)
	require.False(t, res.Duplicate)
	rec, err := e.client.Get(ctx, res.Job.ID)
	require.NoError(t, err)
	require.Equal(t, "report", rec.Kind)
	require.Equal(t, queue.DefaultQueue, rec.Queue)
	require.Equal(t, queue.StatusQueued, rec.Status)
	require.Equal(t, 9, rec.Priority)
	require.Equal(t, 4, rec.MaxAttempts)
	require.Equal(t, "req-42", *rec.CorrelationID)
	require.Equal(t, queue.Auth{"role": "SUPERVISOR", "counties": []any{"Travis"}}, rec.Auth)
	require.JSONEq(t, `{"county":"Travis"}`, string(rec.Payload))
	require.Zero(t, rec.Attempts)
	require.Nil(t, rec.StartedAt)
	require.WithinDuration(t, rec.CreatedAt, rec.RunAt, time.Second, "due now, by the database clock")

	// The kind's defaults apply when the job sets nothing.
	res, err = e.client.Enqueue(ctx, report{County: "Harris"})
	require.NoError(t, err)
	require.Equal(t, 7, res.Job.Priority)
	require.Equal(t, 5, res.Job.MaxAttempts)
}

func TestEnqueueRejectsBadInputAndCreatesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	type unregistered struct{ noop }
	for name, tc := range map[string]struct {
		args queue.Args
		opts []queue.EnqueueOption
		want error
	}{
		"unknown kind":     {args: unknownKind{}, want: queue.ErrUnknownKind},
		"nil args":         {args: nil, want: queue.ErrInvalidPayload},
		"wrong type":       {args: unregistered{}, want: queue.ErrInvalidPayload},
		"priority 0":       {args: noop{}, opts: []queue.EnqueueOption{queue.Priority(0)}, want: queue.ErrInvalidOption},
		"priority 11":      {args: noop{}, opts: []queue.EnqueueOption{queue.Priority(11)}, want: queue.ErrInvalidOption},
		"zero run at":      {args: noop{}, opts: []queue.EnqueueOption{queue.RunAt(time.Time{})}, want: queue.ErrInvalidOption},
		"negative delay":   {args: noop{}, opts: []queue.EnqueueOption{queue.After(-time.Second)}, want: queue.ErrInvalidOption},
		"empty key":        {args: noop{}, opts: []queue.EnqueueOption{queue.IdempotencyKey("")}, want: queue.ErrInvalidOption},
		"custom backoff":   {args: noop{}, opts: []queue.EnqueueOption{queue.RetryBackoff(customBackoff{})}, want: queue.ErrInvalidOption},
		"max attempts 0":   {args: noop{}, opts: []queue.EnqueueOption{queue.MaxAttempts(0)}, want: queue.ErrInvalidOption},
		"nil option":       {args: noop{}, opts: []queue.EnqueueOption{nil}, want: queue.ErrInvalidOption},
		"unencodable auth": {args: noop{}, opts: []queue.EnqueueOption{queue.AuthContext(queue.Auth{"f": func() {}})}, want: queue.ErrInvalidOption},
		"unencodable args": {args: chanArgs{C: make(chan int)}, want: queue.ErrUnknownKind},
	} {
		_, err := e.client.Enqueue(ctx, tc.args, tc.opts...)
		require.ErrorIs(t, err, tc.want, name)
	}
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"))
}

type unknownKind struct{}

func (unknownKind) Kind() string { return "nobody-registered-me" }

type chanArgs struct{ C chan int }

func (chanArgs) Kind() string { return "chan" }

type customBackoff struct{}

func (customBackoff) Delay(int) time.Duration { return time.Second }

func TestEnqueueRawChecksThePayload(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	_, err := e.client.EnqueueRaw(ctx, "report", json.RawMessage(`{"county": 17}`))
	require.ErrorIs(t, err, queue.ErrInvalidPayload)
	require.ErrorContains(t, err, `kind "report" wants queue_test.report`)
	_, err = e.client.EnqueueRaw(ctx, "nope", json.RawMessage(`{}`))
	require.ErrorIs(t, err, queue.ErrUnknownKind)
	res, err := e.client.EnqueueRaw(ctx, "report", json.RawMessage(`{"county": "Bexar"}`), queue.Priority(2))
	require.NoError(t, err)
	require.Equal(t, 2, res.Job.Priority)
	require.Equal(t, int64(1), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"))
}

// EnqueueRawMany checks each job as EnqueueRaw does, names the first that
// fails, and stores all the jobs or none, duplicates by key returned as such.
func TestEnqueueRawManyNamesTheJobThatFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	good := queue.RawParams{Kind: "report", Payload: json.RawMessage(`{"county": "Kent"}`)}
	for i, bad := range []queue.RawParams{
		{Kind: "report", Payload: json.RawMessage(`{"county": 17}`)},
		{Kind: "nope", Payload: json.RawMessage(`{}`)},
		{Kind: "report", Payload: json.RawMessage(`{}`), Options: []queue.EnqueueOption{queue.Priority(99)}},
	} {
		_, err := e.client.EnqueueRawMany(ctx, []queue.RawParams{good, bad})
		var je *queue.JobError
		require.ErrorAs(t, err, &je, "case %d", i)
		require.Equal(t, 1, je.Index)
	}
	_, err := e.client.EnqueueRawMany(ctx, nil)
	require.ErrorIs(t, err, queue.ErrInvalidOption)
	require.Equal(t, int64(0), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"), "nothing stored")

	keyed := good
	keyed.Options = []queue.EnqueueOption{queue.IdempotencyKey("m-1")}
	out, err := e.client.EnqueueRawMany(ctx, []queue.RawParams{keyed, good, keyed})
	require.NoError(t, err)
	require.Len(t, out, 3)
	require.False(t, out[0].Duplicate)
	require.True(t, out[2].Duplicate)
	require.Equal(t, out[0].Job.ID, out[2].Job.ID)
	require.Equal(t, int64(2), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"))
}

// EnqueueRawKeyed fails as EnqueueRawMany does, stores the jobs of a call
// once, names the duplicates, inside a caller's transaction stores nothing
// unless it commits, and tells the Enqueue hooks how many it created, with
// their metadata stored.
func TestEnqueueRawKeyedNamesTheDuplicates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	var created []int64
	hooked, err := queue.NewClient(e.db.Gorm, e.reg, quiet(), queue.WithHooks(queue.Hooks{
		Enqueue: func(ctx context.Context, call *queue.EnqueueCall) (context.Context, func(queue.EnqueueResult)) {
			require.Equal(t, "enqueue_many", call.Operation)
			call.Metadata = map[string]string{"by": "hook"}
			return ctx, func(r queue.EnqueueResult) {
				require.Nil(t, r.Enqueued)
				created = append(created, r.Created)
			}
		}}))
	require.NoError(t, err)
	raw := func(key string) queue.RawParams {
		return queue.RawParams{Kind: "report", Payload: json.RawMessage(`{"county": "Kent"}`),
			Options: []queue.EnqueueOption{queue.IdempotencyKey(key)}}
	}
	bad := queue.RawParams{Kind: "nope", Payload: json.RawMessage(`{}`)}
	_, err = hooked.EnqueueRawKeyed(ctx, []queue.RawParams{raw("a"), bad})
	var je *queue.JobError
	require.ErrorAs(t, err, &je)
	require.Equal(t, 1, je.Index)
	_, err = hooked.EnqueueRawKeyed(ctx, nil)
	require.ErrorIs(t, err, queue.ErrInvalidOption)

	dups, err := hooked.EnqueueRawKeyed(ctx, []queue.RawParams{raw("a"), raw("b"), raw("a")})
	require.NoError(t, err)
	require.Equal(t, []int{2}, dups)
	dups, err = hooked.EnqueueRawKeyed(ctx, []queue.RawParams{raw("c"), raw("b")})
	require.NoError(t, err)
	require.Equal(t, []int{1}, dups)
	require.Equal(t, []int64{2, 1}, created)
	require.Equal(t, int64(3), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"))
	jobs, err := e.client.List(ctx, queue.Filter{})
	require.NoError(t, err)
	require.Equal(t, queue.Metadata{"by": "hook"}, jobs[0].Metadata)

	err = e.db.Gorm.Transaction(func(tx *gorm.DB) error {
		dups, err := e.client.Tx(tx).EnqueueRawKeyed(ctx, []queue.RawParams{raw("d"), raw("c")})
		require.NoError(t, err)
		require.Equal(t, []int{1}, dups)
		return errors.New("roll back")
	})
	require.Error(t, err)
	require.Equal(t, int64(3), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"), "rolled back")
}

func TestIdempotencyKeyReturnsTheExistingJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	first, err := e.client.Enqueue(ctx, report{County: "A"}, queue.IdempotencyKey("daily-A-2025-12-08"))
	require.NoError(t, err)
	again, err := e.client.Enqueue(ctx, report{County: "changed"}, queue.IdempotencyKey("daily-A-2025-12-08"))
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, first.Job.ID, again.Job.ID)
	require.JSONEq(t, `{"county":"A"}`, string(again.Job.Payload), "the existing job is returned as it is")

	// In one call: the second input with the same key is the duplicate of the first.
	out, err := e.client.EnqueueMany(ctx, []queue.Params{
		{Args: report{County: "B"}, Options: []queue.EnqueueOption{queue.IdempotencyKey("k-B")}},
		{Args: noop{}},
		{Args: report{County: "B2"}, Options: []queue.EnqueueOption{queue.IdempotencyKey("k-B")}},
		{Args: report{County: "A again"}, Options: []queue.EnqueueOption{queue.IdempotencyKey("daily-A-2025-12-08")}},
	})
	require.NoError(t, err)
	require.False(t, out[0].Duplicate)
	require.False(t, out[1].Duplicate)
	require.True(t, out[2].Duplicate)
	require.Equal(t, out[0].Job.ID, out[2].Job.ID)
	require.True(t, out[3].Duplicate)
	require.Equal(t, first.Job.ID, out[3].Job.ID)
	require.Equal(t, int64(3), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"))
}

// Many clients racing to enqueue the same key create one job between them.
func TestIdempotencyKeyUnderConcurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	var wg sync.WaitGroup
	ids := make([]int64, 12)
	for i := range ids {
		wg.Go(func() {
			res, err := e.client.Enqueue(context.Background(), report{County: fmt.Sprint(i)}, queue.IdempotencyKey("once"))
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = res.Job.ID
		})
	}
	wg.Wait()
	for _, id := range ids {
		require.Equal(t, ids[0], id)
	}
	require.Equal(t, int64(1), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"))
}

func TestEnqueueManyIsOneStatementInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	params := make([]queue.Params, 50)
	for i := range params {
		params[i] = queue.Params{Args: report{County: fmt.Sprint("C", i)}}
	}
	out, err := e.client.EnqueueMany(ctx, params)
	require.NoError(t, err)
	for i, o := range out {
		require.JSONEq(t, fmt.Sprintf(`{"county":"C%d"}`, i), string(o.Job.Payload), "results follow the input order")
		if i > 0 {
			require.Greater(t, o.Job.ID, out[i-1].Job.ID)
		}
	}
	// One bad job: nothing is created.
	params[10].Options = []queue.EnqueueOption{queue.Priority(99)}
	_, err = e.client.EnqueueMany(ctx, params)
	require.ErrorIs(t, err, queue.ErrInvalidOption)
	require.ErrorContains(t, err, "job 10")
	require.Equal(t, int64(50), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"))
	_, err = e.client.EnqueueMany(ctx, nil)
	require.ErrorIs(t, err, queue.ErrInvalidOption)
}

func TestEnqueueInTheCallersTransaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	boom := errors.New("the caller's own work failed")
	err := e.db.Gorm.Transaction(func(tx *gorm.DB) error {
		if _, err := e.client.Tx(tx).Enqueue(ctx, report{County: "rolled back"}); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"), "the job went with the rollback")

	var id int64
	require.NoError(t, e.db.Gorm.Transaction(func(tx *gorm.DB) error {
		res, err := e.client.Tx(tx).Enqueue(ctx, report{County: "committed"})
		id = res.Job.ID
		return err
	}))
	require.Equal(t, queue.StatusQueued, e.status(t, id))
}

func TestEnqueueBulk(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	params := make([]queue.Params, 12_000)
	for i := range params {
		params[i] = queue.Params{Args: report{County: fmt.Sprint(i)}}
	}
	params[5].Options = []queue.EnqueueOption{queue.Priority(10), queue.CorrelationID("bulk-5"), queue.After(time.Hour)}
	n, err := e.client.EnqueueBulk(ctx, params)
	require.NoError(t, err)
	require.Equal(t, int64(12_000), n)
	require.Equal(t, int64(12_000), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs WHERE status = 'QUEUED'"))
	require.Equal(t, int64(1), e.db.Count(t, `SELECT count(*) FROM sheaf_jobs WHERE priority = 10
		AND correlation_id = 'bulk-5' AND run_at > ?`, e.db.Time(e.db.Now(t).Add(59*time.Minute))))

	// With idempotency keys it goes through the de-duplicating statement.
	keyed := []queue.Params{
		{Args: noop{}, Options: []queue.EnqueueOption{queue.IdempotencyKey("x")}},
		{Args: noop{}, Options: []queue.EnqueueOption{queue.IdempotencyKey("x")}},
		{Args: noop{}},
	}
	n, err = e.client.EnqueueBulk(ctx, keyed)
	require.NoError(t, err)
	require.Equal(t, int64(2), n, "the duplicate is not counted")

	// A key found late, after the copy has sent thousands of jobs: the
	// copy is undone, and the whole bulk goes the de-duplicating way.
	late := make([]queue.Params, 12_000)
	for i := range late {
		late[i] = queue.Params{Args: report{County: fmt.Sprint(i)}}
	}
	late[11_000].Options = []queue.EnqueueOption{queue.IdempotencyKey("x")} // taken above
	n, err = e.client.EnqueueBulk(ctx, late)
	require.NoError(t, err)
	require.Equal(t, int64(11_999), n, "the job whose key is taken is not stored")
	require.Equal(t, int64(24_001), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"), "each job once")

	// Bad input: nothing is copied.
	params[100].Args = unknownKind{}
	_, err = e.client.EnqueueBulk(ctx, params)
	require.ErrorIs(t, err, queue.ErrUnknownKind)
	require.ErrorContains(t, err, "job 100: ")
	require.Equal(t, int64(24_001), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"))
}

// A bulk that goes through the keyed statement in slices is still all or
// nothing: here the database refuses a job in its second slice.
func TestEnqueueBulkInSlicesIsAllOrNothing(t *testing.T) {
	pgtest.PostgresOnly(t, "a PL/pgSQL trigger refuses a row")
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	require.NoError(t, e.db.Gorm.Exec(`CREATE FUNCTION refuse_7000() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'county 7000 refused'; END $$`).Error)
	require.NoError(t, e.db.Gorm.Exec(`CREATE TRIGGER refuse_7000 BEFORE INSERT ON sheaf_jobs
		FOR EACH ROW WHEN (NEW.payload->>'county' = '7000') EXECUTE FUNCTION refuse_7000()`).Error)
	params := make([]queue.Params, 8000)
	for i := range params {
		params[i] = queue.Params{Args: report{County: fmt.Sprint(i)}, Options: []queue.EnqueueOption{queue.IdempotencyKey(fmt.Sprint("k", i))}}
	}
	n, err := e.client.EnqueueBulk(ctx, params)
	require.ErrorContains(t, err, "county 7000 refused")
	require.Zero(t, n)
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"), "the first slice of 5000 is not kept")

	// Inside a caller's transaction, the caller's own work survives (the
	// bulk was a savepoint) and the caller decides.
	err = e.db.Gorm.Transaction(func(tx *gorm.DB) error {
		_, err := e.client.Tx(tx).Enqueue(ctx, noop{})
		require.NoError(t, err)
		_, err = e.client.Tx(tx).EnqueueBulk(ctx, params)
		require.ErrorContains(t, err, "county 7000 refused")
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, int64(1), e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"), "only the caller's noop job")
}

func TestGetAndList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	_, err := e.client.Get(ctx, 12345)
	require.ErrorIs(t, err, queue.ErrNotFound)
	for i := range 5 {
		_, err := e.client.Enqueue(ctx, report{County: fmt.Sprint(i)}, queue.CorrelationID(fmt.Sprint("c", i%2)))
		require.NoError(t, err)
		_, err = e.client.Enqueue(ctx, noop{}, queue.OnQueue("other"))
		require.NoError(t, err)
	}
	all, err := e.client.List(ctx, queue.Filter{})
	require.NoError(t, err)
	require.Len(t, all, 10)
	reports, err := e.client.List(ctx, queue.Filter{Kinds: []string{"report"}, CorrelationID: "c0"})
	require.NoError(t, err)
	require.Len(t, reports, 3)
	other, err := e.client.List(ctx, queue.Filter{Queue: "other", Statuses: []queue.Status{queue.StatusQueued}})
	require.NoError(t, err)
	require.Len(t, other, 5)
	page1, err := e.client.List(ctx, queue.Filter{Limit: 4})
	require.NoError(t, err)
	page2, err := e.client.List(ctx, queue.Filter{Limit: 4, AfterID: page1[3].ID})
	require.NoError(t, err)
	require.Len(t, page2, 4)
	require.Greater(t, page2[0].ID, page1[3].ID)
	none, err := e.client.List(ctx, queue.Filter{CreatedAfter: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.Empty(t, none)
	_, err = e.client.List(ctx, queue.Filter{Limit: 10_001})
	require.ErrorIs(t, err, queue.ErrInvalidOption)
}

func TestCancelAndRetryTransitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	res, err := e.client.Enqueue(ctx, report{County: "X"})
	require.NoError(t, err)
	id := res.Job.ID

	_, err = e.client.Retry(ctx, id)
	require.ErrorIs(t, err, queue.ErrWrongStatus, "a queued job is not retried")
	rec, err := e.client.Cancel(ctx, id)
	require.NoError(t, err)
	require.Equal(t, queue.StatusCancelled, rec.Status)
	require.NotNil(t, rec.CompletedAt)
	_, err = e.client.Cancel(ctx, id)
	require.ErrorIs(t, err, queue.ErrWrongStatus)
	require.ErrorContains(t, err, "it is CANCELLED")

	rec, err = e.client.Retry(ctx, id)
	require.NoError(t, err)
	require.Equal(t, queue.StatusQueued, rec.Status)
	require.Zero(t, rec.Attempts, "cancelled before it ran: nothing to carry over")
	require.Equal(t, 5, rec.MaxAttempts)
	require.Nil(t, rec.CompletedAt)

	// A job that failed after attempts keeps its count and gets as many again.
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET status = 'FAILED', attempts = 5 WHERE id = ?", id).Error)
	rec, err = e.client.Retry(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 5, rec.Attempts)
	require.Equal(t, 10, rec.MaxAttempts)

	_, err = e.client.Cancel(ctx, 999_999)
	require.ErrorIs(t, err, queue.ErrNotFound)
	_, err = e.client.Retry(ctx, 999_999)
	require.ErrorIs(t, err, queue.ErrNotFound)

	// A completed job is neither cancelled nor retried.
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET status = 'COMPLETED' WHERE id = ?", id).Error)
	_, err = e.client.Cancel(ctx, id)
	require.ErrorIs(t, err, queue.ErrWrongStatus)
	_, err = e.client.Retry(ctx, id)
	require.ErrorIs(t, err, queue.ErrWrongStatus)
}

// RunNow brings a job due later forward, keeping its attempts; a job
// already due stays as it is, and other statuses are refused.
func TestRunNow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	later := time.Now().Add(time.Hour)
	res, err := e.client.Enqueue(ctx, report{County: "X"}, queue.RunAt(later))
	require.NoError(t, err)
	id := res.Job.ID
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET attempts = 1 WHERE id = ?", id).Error)

	rec, err := e.client.RunNow(ctx, id)
	require.NoError(t, err)
	require.Equal(t, queue.StatusQueued, rec.Status)
	require.False(t, rec.RunAt.After(time.Now()), "due now, not at %v", rec.RunAt)
	require.Equal(t, 1, rec.Attempts)
	require.Equal(t, 5, rec.MaxAttempts)
	due := rec.RunAt
	rec, err = e.client.RunNow(ctx, id)
	require.NoError(t, err)
	require.True(t, rec.RunAt.Equal(due), "a due job keeps its run time")

	_, err = e.client.RunNow(ctx, 999_999)
	require.ErrorIs(t, err, queue.ErrNotFound)
	_, err = e.client.Cancel(ctx, id)
	require.NoError(t, err)
	_, err = e.client.RunNow(ctx, id)
	require.ErrorIs(t, err, queue.ErrWrongStatus)
}

func TestRetryFailedSelects(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	for i := range 6 {
		_, err := e.client.Enqueue(ctx, report{County: fmt.Sprint(i)}, queue.CorrelationID(fmt.Sprint("run-", i%2)))
		require.NoError(t, err)
	}
	_, err := e.client.Enqueue(ctx, noop{}, queue.CorrelationID("run-0"))
	require.NoError(t, err)
	require.NoError(t, e.db.Gorm.Exec(`UPDATE sheaf_jobs SET status = 'FAILED', attempts = 3,
		last_error = 'boom', completed_at = ?`, e.db.Time(e.db.Now(t))).Error)

	n, err := e.client.RetryFailed(ctx, queue.Filter{Kinds: []string{"report"}, CorrelationID: "run-0"})
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	require.Equal(t, int64(3), e.db.Count(t, `SELECT count(*) FROM sheaf_jobs WHERE status = 'QUEUED'
		AND attempts = 3 AND max_attempts = 8 AND last_error = 'boom' AND completed_at IS NULL
		AND kind = 'report' AND correlation_id = 'run-0'`), "their history is kept, and they get five more attempts")
	n, err = e.client.RetryFailed(ctx, queue.Filter{})
	require.NoError(t, err)
	require.Equal(t, int64(4), n, "the rest")
	n, err = e.client.RetryFailed(ctx, queue.Filter{})
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestStats(t *testing.T) {
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	for range 3 {
		_, err := e.client.Enqueue(ctx, report{County: "x"})
		require.NoError(t, err)
	}
	_, err := e.client.Enqueue(ctx, noop{}, queue.After(time.Hour))
	require.NoError(t, err)
	require.NoError(t, e.db.Gorm.Exec(`UPDATE sheaf_jobs SET run_at = ? WHERE id = (SELECT min(id) FROM sheaf_jobs)`,
		e.db.Time(e.db.Now(t).Add(-90*time.Second))).Error)
	require.NoError(t, e.db.Gorm.Exec(`UPDATE sheaf_jobs SET status = 'FAILED' WHERE id = (SELECT max(id) FROM sheaf_jobs WHERE kind = 'report')`).Error)
	s, err := e.client.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, map[queue.Status]int64{queue.StatusQueued: 3, queue.StatusFailed: 1}, s.ByStatus)
	require.Equal(t, map[string]map[queue.Status]int64{
		"report": {queue.StatusQueued: 2, queue.StatusFailed: 1},
		"noop":   {queue.StatusQueued: 1},
	}, s.ByKind)
	require.Equal(t, int64(2), s.Ready, "the delayed job is not ready")
	require.GreaterOrEqual(t, s.OldestReady, 90*time.Second)
	require.Less(t, s.OldestReady, 120*time.Second)
}

// Stats and Queues count finished jobs from the day roll-ups once their
// days are rolled up for good, so their counts outlive the pruned jobs and
// their cost does not grow with the finished jobs; the days since, and the
// jobs that wait or run, are counted where they are.
func TestStatsCountPrunedJobsFromTheRollups(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.client = dayOfHoursClient(t, e)
	ctx := context.Background()
	old, lately, now := time.Now().AddDate(0, 0, -40), time.Now().AddDate(0, 0, -2), time.Now()
	for range 3 {
		insertJob(t, e, "report", "COMPLETED", "", "", 1, &old, &old, "")
	}
	insertJob(t, e, "report", "FAILED", "", "", 3, &old, &old, "boom")
	insertJob(t, e, "noop", "COMPLETED", "", "", 1, &lately, &lately, "")
	insertJob(t, e, "noop", "CANCELLED", "", "", 1, &lately, &lately, "")
	insertJob(t, e, "report", "COMPLETED", "", "", 1, &now, &now, "")
	insertJob(t, e, "report", "QUEUED", "", "", 0, nil, nil, "")
	running := insertJob(t, e, "report", "PROCESSING", "", "", 1, &now, nil, "")
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET locked_until = ? WHERE id = ?",
		e.db.Time(now.Add(time.Minute)), running).Error)
	rescued := insertJob(t, e, "report", "QUEUED", "", "", 1, nil, nil, "")
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET rescues = 1 WHERE id = ?", rescued).Error)

	want := map[string]map[queue.Status]int64{
		"report": {queue.StatusCompleted: 4, queue.StatusFailed: 1, queue.StatusQueued: 2, queue.StatusProcessing: 1},
		"noop":   {queue.StatusCompleted: 1, queue.StatusCancelled: 1},
	}
	// The noop jobs in a queue of their own, for Queues.
	require.NoError(t, e.db.Gorm.Exec("UPDATE sheaf_jobs SET queue = 'n' WHERE kind = 'noop'").Error)
	wantQueues := map[string]map[queue.Status]int64{"default": want["report"], "n": want["noop"]}
	queueCounts := func() map[string]map[queue.Status]int64 {
		t.Helper()
		qs, err := e.client.Queues(ctx)
		require.NoError(t, err)
		out := map[string]map[queue.Status]int64{}
		for _, q := range qs {
			out[q.Name] = q.Counts
		}
		return out
	}
	before, err := e.client.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, want, before.ByKind, "before any roll-up, every job is counted where it is")
	require.Equal(t, wantQueues, queueCounts())

	pruned, err := e.client.Prune(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4, pruned, "the nights of 40 days ago are past their retention")
	after, err := e.client.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, want, after.ByKind, "the roll-ups count the pruned jobs and the days before today")
	require.Equal(t, int64(5), after.ByStatus[queue.StatusCompleted])
	require.Equal(t, wantQueues, queueCounts(), "Queues counts as Stats does")

	// A job finished today, beside today's rows, and one rolled up: a
	// status whose count comes in two parts adds up.
	insertJob(t, e, "report", "FAILED", "", "", 1, &now, &now, "boom")
	wantQueues["default"][queue.StatusFailed]++
	require.Equal(t, wantQueues, queueCounts())
}

func TestAuthIsNeverPrinted(t *testing.T) {
	t.Parallel()
	a := queue.Auth{"role": "ADMIN", "token": "secret-token"}
	require.Equal(t, "[auth redacted]", fmt.Sprint(a))
	require.Equal(t, "[auth redacted]", fmt.Sprintf("%v %s", a, a)[:15])
	require.NotContains(t, fmt.Sprintf("%+v", struct{ A queue.Auth }{a}), "secret-token")
}

// Every call of a client on a schema nobody migrated says so, in words that
// tell the caller what to do, and keeps the database's error.
func TestClientOnAnUnmigratedSchema(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	reg := queue.NewRegistry()
	basic(t)(reg)
	c, err := queue.NewClient(db.Gorm, reg, quiet())
	require.NoError(t, err)
	ctx := context.Background()
	calls := map[string]func() error{
		"Enqueue": func() error { _, err := c.Enqueue(ctx, noop{}); return err },
		"EnqueueKeyed": func() error {
			_, err := c.Enqueue(ctx, noop{}, queue.IdempotencyKey("k"))
			return err
		},
		"EnqueueRaw":  func() error { _, err := c.EnqueueRaw(ctx, "noop", json.RawMessage(`{}`)); return err },
		"EnqueueBulk": func() error { _, err := c.EnqueueBulk(ctx, []queue.Params{{Args: noop{}}}); return err },
		"EnqueueBulkKeyed": func() error {
			_, err := c.EnqueueBulk(ctx, []queue.Params{{Args: noop{}, Options: []queue.EnqueueOption{queue.IdempotencyKey("k")}}})
			return err
		},
		"Get":         func() error { _, err := c.Get(ctx, 1); return err },
		"List":        func() error { _, err := c.List(ctx, queue.Filter{}); return err },
		"Cancel":      func() error { _, err := c.Cancel(ctx, 1); return err },
		"Retry":       func() error { _, err := c.Retry(ctx, 1); return err },
		"RetryFailed": func() error { _, err := c.RetryFailed(ctx, queue.Filter{}); return err },
		"Stats":       func() error { _, err := c.Stats(ctx); return err },
		"Review":      func() error { _, err := c.Review(ctx, queue.ReviewQuery{RunID: "r"}); return err },
		"Activity": func() error {
			_, err := c.Activity(ctx, queue.ActivityQuery{Since: time.Now().Add(-time.Hour), Bucket: time.Minute})
			return err
		},
	}
	for name, call := range calls {
		err := call()
		require.ErrorIs(t, err, queue.ErrNotMigrated, name)
		require.ErrorContains(t, err, ": schema not migrated; call Client.Migrate", name)
		require.NotContains(t, err.Error(), ": queue: schema", name) // "queue: list: schema ...", said once
		var pe *pgconn.PgError
		require.ErrorAs(t, err, &pe, name)
		require.Equal(t, "42P01", pe.Code, name)
	}
	// A schema migrated by an older sheaf lacks the newer columns, which
	// every enqueue writes.
	require.NoError(t, c.Migrate(ctx))
	require.NoError(t, db.Gorm.Exec("ALTER TABLE sheaf_jobs DROP COLUMN period").Error)
	for name, call := range calls {
		if strings.HasPrefix(name, "Enqueue") {
			require.ErrorIs(t, call(), queue.ErrNotMigrated, name)
		}
	}
}

// A call blocked in the database ends when its context does, with an
// error that says so: errors.Is matches the context's error, whatever the
// driver made of the interrupted statement.
func TestClientCallsEndWithTheirContext(t *testing.T) {
	pgtest.PostgresOnly(t, "it blocks the calls with LOCK TABLE")
	t.Parallel()
	e := newEnv(t, basic(t))
	ctx := context.Background()
	job, err := e.client.Enqueue(ctx, noop{})
	require.NoError(t, err)
	id := job.Job.ID
	lock, err := e.db.SQL.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, lock.Rollback()) }()
	_, err = lock.Exec("LOCK TABLE sheaf_jobs IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	c := e.client
	calls := map[string]func(context.Context) error{
		"Enqueue": func(ctx context.Context) error { _, err := c.Enqueue(ctx, noop{}); return err },
		"EnqueueBulk": func(ctx context.Context) error {
			_, err := c.EnqueueBulk(ctx, []queue.Params{{Args: noop{}}})
			return err
		},
		"Get":    func(ctx context.Context) error { _, err := c.Get(ctx, id); return err },
		"List":   func(ctx context.Context) error { _, err := c.List(ctx, queue.Filter{}); return err },
		"Count":  func(ctx context.Context) error { _, err := c.Count(ctx, queue.Filter{}); return err },
		"Cancel": func(ctx context.Context) error { _, err := c.Cancel(ctx, id); return err },
		"Stats":  func(ctx context.Context) error { _, err := c.Stats(ctx); return err },
	}
	for name, call := range calls {
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := call(short)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, name)
		require.ErrorContains(t, err, "queue: ", name)
	}
}
