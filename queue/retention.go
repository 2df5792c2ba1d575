package queue

import (
	"cmp"
	"context"
	"fmt"
	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/maintain"
	"github.com/sheaf-dev/sheaf/queue/internal/operate"
)

// KeepForever, as a Retention duration, keeps what it applies to forever.
const KeepForever time.Duration = -1

// Default retention, by how long after it finished a job is deleted. A
// nightly shop looks back about a week to see what ran, so completed jobs
// stay 7 days; failed and cancelled jobs are what someone must look into,
// and must outlast a long weekend and a holiday, so they stay 30 days.
// Day roll-ups keep the history that the morning review and the console's
// charts compare with for a year, at a few rows per kind a day; hour
// roll-ups keep the activity series by the hour for a month.
const (
	DefaultKeepCompleted = 7 * 24 * time.Hour
	DefaultKeepCancelled = 30 * 24 * time.Hour
	DefaultKeepFailed    = 30 * 24 * time.Hour
	DefaultKeepHistory   = 365 * 24 * time.Hour
	// DefaultKeepHourlyHistory is how long hour roll-ups are kept: the
	// activity series (Client.Activity, by the hour) of the last 30 days.
	DefaultKeepHourlyHistory = 30 * 24 * time.Hour
	// DefaultKeepAlerts is how long package queue/alert's episodes that
	// ended, their notices and the silences that ended are kept: a
	// quarter, to compare this month's alerts with the last ones.
	DefaultKeepAlerts = 90 * 24 * time.Hour
	// MinAlertRetention is the shortest alert retention accepted: an
	// episode that ended must outlast the alert rules' look-back (a day
	// by default), or a condition still in view could fire again.
	MinAlertRetention = 7 * 24 * time.Hour
	// MinRetention is the shortest retention accepted: shorter would
	// delete jobs an operator is still looking at.
	MinRetention = time.Hour
)

// Retention says how long finished jobs, by status, and their day roll-ups
// are kept, for WithRetention (the client's) and Retain (a kind's). A zero
// duration means the default (the client's, for a kind); KeepForever keeps;
// any other value must be MinRetention or more. Jobs are kept from the time
// they finished.
//
// A job is deleted with its recorded attempts and the audit entries that
// target it alone, and not before every other job of its run and of its
// period may be deleted too: dependants released later still find their
// parents, and a run is read whole or not at all. A pass of the pruner
// reads a period whole at most once a minute: a job added to an old period
// or retried while the pass deletes it finds the period partly deleted.
// Jobs are deleted only once their day and their hour are rolled up (see
// History and Activity), and their run's counts kept (see Client.Runs).
type Retention struct {
	Completed, Cancelled, Failed time.Duration
	// History is how long day roll-ups are kept (client only). Default
	// DefaultKeepHistory.
	History time.Duration
	// HourlyHistory is how long hour roll-ups are kept (client only).
	// Default DefaultKeepHourlyHistory.
	HourlyHistory time.Duration
	// Alerts is how long the alert state (package queue/alert) is kept
	// after it ended (client only): resolved episodes and digests with
	// their notices, once every notice is sent (an unsent one is never
	// deleted), and silences past their end. Default DefaultKeepAlerts;
	// at least MinAlertRetention.
	Alerts time.Duration
	// Archive, if set (client only), receives every batch of jobs before
	// they are deleted, in the transaction that deletes them: an error
	// deletes none of the batch, and the next pass offers it again. It runs
	// on the elected runner's maintenance, so it must not take long: a
	// batch is at most 1,000 jobs.
	Archive func(ctx context.Context, jobs []JobRecord) error
}

// RetentionError is the error of a Retention that cannot be used. It wraps
// ErrInvalidOption.
type RetentionError struct {
	// Field is the field at fault: Completed, Cancelled, Failed, History,
	// HourlyHistory, Alerts or Archive.
	Field  string
	Value  time.Duration
	Reason string
}

func (e *RetentionError) Error() string {
	if e.Field == "Archive" {
		return fmt.Sprintf("queue: retention: %s %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("queue: retention: %s %v %s", e.Field, e.Value, e.Reason)
}

// Unwrap returns ErrInvalidOption.
func (*RetentionError) Unwrap() error { return ErrInvalidOption }

// check refuses durations that are neither zero, KeepForever nor
// MinRetention or more, and, for a kind, the client-only fields.
func (r Retention) check(kind bool) error {
	field, v, why := maintain.Flaw(kind, r.durations(), r.History, r.HourlyHistory, r.Alerts, r.Archive != nil, MinRetention, MinAlertRetention)
	if why != "" {
		return &RetentionError{Field: field, Value: v, Reason: why}
	}
	return nil
}

func (r Retention) durations() maintain.Durations {
	return maintain.Durations{Completed: r.Completed, Cancelled: r.Cancelled, Failed: r.Failed}
}

// clientOption is a ClientOption only.
type clientOption func(*config) error

func (f clientOption) applyClient(c *config) error { return f(c) }

// WithRetention sets how long the client's finished jobs, day roll-ups and
// alert state are kept (see Retention), by the maintenance of its runners:
// the elected runner deletes finished jobs in batches of 1,000, each its
// own short transaction followed by a pause three times as long, keeps the
// roll-ups, and deletes the alert state
// that ended long enough ago. Default: DefaultKeepCompleted,
// DefaultKeepCancelled, DefaultKeepFailed, DefaultKeepHistory and
// DefaultKeepAlerts. A bad value is a *RetentionError.
func WithRetention(r Retention) ClientOption {
	return clientOption(func(c *config) error { return check.Set(&c.retention, r, r.check(false)) })
}

// Retain sets how long a kind's finished jobs are kept, by status,
// overriding the client's retention; zero fields keep the client's. History
// and Archive are the client's: set here, they are a *RetentionError. Runs
// and periods go whole, so a kind kept longer keeps the other jobs of its
// runs and periods as long.
func Retain(r Retention) RegisterOption {
	return kindOption(func(o *jobOptions) error { return check.Set(&o.Retain, r.durations(), r.check(true)) })
}

// upkeepAt returns the roll-up and pruning tasks, going by now (nil: the
// system clock).
func (c *ops) upkeepAt(now func() time.Time) []maintain.Task {
	r := c.cfg.retention
	return maintain.Upkeep(c.st, c.db, maintain.Retention[JobRecord]{Keep: r.durations(),
		Default: maintain.Durations{Completed: DefaultKeepCompleted, Cancelled: DefaultKeepCancelled, Failed: DefaultKeepFailed},
		History: cmp.Or(r.History, DefaultKeepHistory), Hours: cmp.Or(r.HourlyHistory, DefaultKeepHourlyHistory),
		Alerts: cmp.Or(r.Alerts, DefaultKeepAlerts), Archive: r.Archive,
		Kinds: c.reg.retained}, c.reviewKept, now)
}

// reviewKept finds the slow jobs of each run whose counts the maintenance
// just kept, as a review the console asks for would, and keeps them with
// its counts (operate.Reviewer.KeepSlow), so that the morning's first look
// at a night of a hundred thousand jobs reads one row too. One that fails
// is only a read deferred to the first review that asks.
func (c *ops) reviewKept(ctx context.Context, runs []string) {
	for _, run := range runs {
		_, rq, err := operate.Asked{RunID: run}.Query(failureSamples)
		if err == nil {
			err = c.reviewer(rq).KeepSlow(ctx, rq)
		}
		if err != nil && ctx.Err() == nil {
			c.cfg.logger.Warn("queue: slow jobs of a finished run", "run", run, "err", err)
		}
	}
}

// Prune rolls up the days that are over and deletes, in batches, the
// finished jobs (and the alert state) the client's retention no longer
// keeps, now, in this
// process, and returns how many jobs it deleted: what the elected runner's
// maintenance does every 10 minutes, for a program that runs no runner, or
// an operator who changed the retention. It is safe while runners work,
// each batch a short transaction; one that meets the maintenance rolling
// up the same day at the same moment may fail, and may be called again.
func (c *Client) Prune(ctx context.Context) (int64, error) {
	n, err := maintain.RunNow(ctx, c.upkeepAt(nil))
	if err != nil {
		return n, fmt.Errorf("queue: %w", err)
	}
	return n, nil
}

// HistoryQuery selects day roll-ups: the UTC days from From's to To's (To
// exclusive, zero: now, so today is in), of a kind and a queue if set.
type HistoryQuery struct {
	Kind, Queue string
	From, To    time.Time
}

// DayStats is one UTC day of a kind on a queue: its jobs that finished
// that day, counted by status; Retries counts their attempts past the
// first; P50, P95 and Max are the run times (start of the last attempt to
// completion) of the completed ones, the 95th percentile by nearest rank;
// Errors counts the failed ones by the shape of their last error (numbers,
// hex and UUIDs replaced, as the console groups failures), the 20 largest,
// the rest under "(other)".
type DayStats struct {
	Day                                   time.Time
	Kind, Queue                           string
	Completed, Failed, Cancelled, Retries int64
	P50, P95, Max                         time.Duration
	Errors                                map[string]int64
}

// maxHistoryDays bounds the days one History call covers.
const maxHistoryDays = 3660

// History returns the day roll-ups q selects, by day, kind and queue; days
// without finished jobs are left out. Roll-ups outlive the jobs they count
// (see Retention): the runners' maintenance makes a day's final a few
// minutes after it is over; History reads the days not final yet, today's
// among them, from the jobs themselves, so they are up to date. It reads
// one row per kind, queue and final day.
func (c *ops) History(ctx context.Context, q HistoryQuery) ([]DayStats, error) {
	days, err := maintain.Days(ctx, c.st, c.db, maintain.HistoryQuery(q), maxHistoryDays)
	return converted(days, func(d maintain.DayStats) DayStats { return DayStats(d) }), err
}
