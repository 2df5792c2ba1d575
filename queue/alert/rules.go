package alert

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/internal/errshape"
)

// Rule is a condition the Alerter checks every round. Each holding of it,
// for one key (a job, a run, a queue, a schedule), is an episode: it fires
// once, and resolves once when the condition clears. Build rules with the
// constructors of this package (Dead, NewErrorGroup, RunFailures,
// QueueDepth, OldestDue, SlowKind, MissedTick, RunDeadline); each returns a
// type whose methods configure it, and Named renames it, so that two rules
// of one type can differ.
type Rule interface {
	// Name names the rule: in notices, episodes and silences. Names are
	// unique among an Alerter's rules.
	Name() string
	// check returns what holds now, one finding per key.
	check(ctx context.Context, e *env) ([]finding, error)
	// hold is how long a finding must last before its episode fires.
	hold() time.Duration
	validate() error
}

// finding is one key for which a rule's condition holds now.
type finding struct {
	key, kind, queue, summary string
}

// env is what rules read: the client, the alerter's time now, and the
// keys of the rule's open episodes.
type env struct {
	c    *queue.Client
	now  time.Time
	open []string
}

// named holds a rule's name; every rule type embeds it.
type named struct{ name string }

func (n *named) Name() string { return n.name }

func (*named) hold() time.Duration { return 0 }

// lookback is how far back a rule that reads runs or failed jobs looks.
type lookback struct{ within time.Duration }

func (l lookback) validate() error {
	if l.within <= 0 {
		return fmt.Errorf("%w: lookback %v is not positive", ErrInvalid, l.within)
	}
	return nil
}

// DefaultLookback is how far back Dead, NewErrorGroup and RunFailures look
// unless their Within says otherwise.
const DefaultLookback = 24 * time.Hour

// maxRead bounds the jobs a rule reads in one round.
const maxRead = 1000

// DeadRule fires for each job that failed for good (status FAILED) within
// its lookback. The episode's key is the job's ID; it resolves when the
// job is retried, cancelled or deleted, or when it failed longer ago than
// the lookback. It reads the newest 1,000 FAILED jobs each round, and the
// jobs of its open episodes that are not among them.
type DeadRule struct {
	named
	lookback
	kinds []string
	limit int // of the newest FAILED jobs read; maxRead but in tests
}

// Dead returns a rule, named "dead", that fires for each job that failed
// for good in the last DefaultLookback, of every kind.
func Dead() *DeadRule {
	return &DeadRule{named: named{"dead"}, lookback: lookback{DefaultLookback}, limit: maxRead}
}

// Named renames the rule.
func (r *DeadRule) Named(name string) *DeadRule { r.name = name; return r }

// Within sets how long ago a job may have failed and still fire.
func (r *DeadRule) Within(d time.Duration) *DeadRule { r.within = d; return r }

// Kinds restricts the rule to jobs of these kinds.
func (r *DeadRule) Kinds(kinds ...string) *DeadRule { r.kinds = kinds; return r }

func (r *DeadRule) check(ctx context.Context, e *env) ([]finding, error) {
	failed, err := e.c.List(ctx, queue.Filter{Kinds: r.kinds, Statuses: []queue.Status{queue.StatusFailed}, Newest: true, Limit: r.limit})
	if err != nil {
		return nil, err
	}
	// An open episode's job beyond the newest read is read by itself, so
	// that its episode does not end while it is still FAILED.
	listed := map[string]bool{}
	for _, j := range failed {
		listed[deadKey(j.ID)] = true
	}
	for _, key := range e.open {
		var id int64
		if _, err := fmt.Sscanf(key, "job %d", &id); err != nil || listed[key] {
			continue
		}
		j, err := e.c.Get(ctx, id)
		switch {
		case errors.Is(err, queue.ErrNotFound):
		case err != nil:
			return nil, err
		case j.Status == queue.StatusFailed:
			failed = append(failed, *j)
		}
	}
	var out []finding
	for _, j := range failed {
		if j.CompletedAt == nil || j.CompletedAt.Before(e.now.Add(-r.within)) {
			continue
		}
		msg := ""
		if j.LastError != nil {
			msg = ": " + *j.LastError
		}
		out = append(out, finding{key: deadKey(j.ID), kind: j.Kind, queue: j.Queue,
			summary: fmt.Sprintf("job %d (%s) failed for good after %d attempts%s", j.ID, j.Kind, j.Attempts, msg)})
	}
	return out, nil
}

func deadKey(id int64) string { return fmt.Sprintf("job %d", id) }

// ErrorGroupRule fires once for each error group in each recent run: the
// FAILED jobs of a run grouped by the shape of their errors (their
// messages with IDs and numbers taken out, as the console groups them).
// The key is the run's ID and the group. The episode resolves when no
// FAILED job of the run has that error any more. It reads the runs whose
// first job was created within its lookback.
type ErrorGroupRule struct {
	named
	lookback
}

// NewErrorGroup returns a rule, named "error-group", that fires for each
// new error group in the runs of the last DefaultLookback.
func NewErrorGroup() *ErrorGroupRule {
	return &ErrorGroupRule{named: named{"error-group"}, lookback: lookback{DefaultLookback}}
}

// Named renames the rule.
func (r *ErrorGroupRule) Named(name string) *ErrorGroupRule { r.name = name; return r }

// Within sets how recent a run's first job must be.
func (r *ErrorGroupRule) Within(d time.Duration) *ErrorGroupRule { r.within = d; return r }

func (r *ErrorGroupRule) check(ctx context.Context, e *env) ([]finding, error) {
	runs, err := recentRuns(ctx, e, r.within)
	if err != nil {
		return nil, err
	}
	var out []finding
	for _, run := range runs {
		if run.Counts[queue.StatusFailed] == 0 {
			continue
		}
		failed, err := e.c.List(ctx, queue.Filter{RunID: run.RunID, Statuses: []queue.Status{queue.StatusFailed}, Limit: maxRead})
		if err != nil {
			return nil, err
		}
		type group struct {
			n     int
			kinds []string
			queue string
		}
		groups := map[string]*group{}
		var order []string
		for _, j := range failed {
			shape := ""
			if j.LastError != nil {
				shape = errshape.Of(*j.LastError)
			}
			g := groups[shape]
			if g == nil {
				g = &group{queue: j.Queue}
				groups[shape] = g
				order = append(order, shape)
			}
			g.n++
			if !slices.Contains(g.kinds, j.Kind) {
				g.kinds = append(g.kinds, j.Kind)
			}
		}
		for _, shape := range order {
			g := groups[shape]
			kind := ""
			if len(g.kinds) == 1 {
				kind = g.kinds[0]
			}
			out = append(out, finding{key: run.RunID + ": " + shortShape(shape), kind: kind, queue: g.queue,
				summary: fmt.Sprintf("run %s: %d failed job(s) of %s with error %q", run.RunID, g.n, strings.Join(g.kinds, ", "), shape)})
		}
	}
	return out, nil
}

// maxShape bounds the error shape in a key, which an index holds.
const maxShape = 200

// shortShape returns shape, or, when it is longer than maxShape bytes, its
// first bytes (whole runes) and a hash of all of it, so that keys stay
// short and distinct.
func shortShape(shape string) string {
	if len(shape) <= maxShape {
		return shape
	}
	cut := maxShape
	for cut > 0 && !utf8.RuneStart(shape[cut]) {
		cut--
	}
	sum := sha256.Sum256([]byte(shape))
	return shape[:cut] + "… #" + hex.EncodeToString(sum[:4])
}

// recentRuns lists the runs whose first job was created in the last
// within.
func recentRuns(ctx context.Context, e *env, within time.Duration) ([]queue.RunSummary, error) {
	return e.c.Runs(ctx, queue.RunsQuery{FirstFrom: e.now.Add(-within), Limit: 10_000})
}

// RunFailuresRule fires for each recent run with at least N FAILED jobs;
// the key is the run's ID. It resolves when retries bring the run's
// FAILED jobs below N.
type RunFailuresRule struct {
	named
	lookback
	n int64
}

// RunFailures returns a rule, named "run-failures", that fires for each
// run of the last DefaultLookback with n or more FAILED jobs.
func RunFailures(n int64) *RunFailuresRule {
	return &RunFailuresRule{named: named{"run-failures"}, lookback: lookback{DefaultLookback}, n: n}
}

// Named renames the rule.
func (r *RunFailuresRule) Named(name string) *RunFailuresRule { r.name = name; return r }

// Within sets how recent a run's first job must be.
func (r *RunFailuresRule) Within(d time.Duration) *RunFailuresRule { r.within = d; return r }

func (r *RunFailuresRule) validate() error {
	if r.n < 1 {
		return fmt.Errorf("%w: rule %q: RunFailures needs at least 1, not %d", ErrInvalid, r.name, r.n)
	}
	return r.lookback.validate()
}

func (r *RunFailuresRule) check(ctx context.Context, e *env) ([]finding, error) {
	runs, err := recentRuns(ctx, e, r.within)
	if err != nil {
		return nil, err
	}
	var out []finding
	for _, run := range runs {
		if n := run.Counts[queue.StatusFailed]; n >= r.n {
			out = append(out, finding{key: run.RunID,
				summary: fmt.Sprintf("run %s: %d of %d jobs failed", run.RunID, n, run.Total)})
		}
	}
	return out, nil
}

// QueueDepthRule fires for each queue with at least N QUEUED jobs (due or
// not) for at least a given time; the key is the queue's name.
type QueueDepthRule struct {
	named
	depth  int64
	forDur time.Duration
	queue  string
}

// QueueDepth returns a rule, named "queue-depth", that fires for each
// queue that has held depth or more QUEUED jobs for at least d (0: at
// once).
func QueueDepth(depth int64, d time.Duration) *QueueDepthRule {
	return &QueueDepthRule{named: named{"queue-depth"}, depth: depth, forDur: d}
}

// Named renames the rule.
func (r *QueueDepthRule) Named(name string) *QueueDepthRule { r.name = name; return r }

// Queue restricts the rule to one queue.
func (r *QueueDepthRule) Queue(name string) *QueueDepthRule { r.queue = name; return r }

func (r *QueueDepthRule) hold() time.Duration { return r.forDur }

func (r *QueueDepthRule) validate() error {
	if r.depth < 1 || r.forDur < 0 {
		return fmt.Errorf("%w: rule %q: QueueDepth needs a depth of at least 1 and a time not negative", ErrInvalid, r.name)
	}
	return nil
}

func (r *QueueDepthRule) check(ctx context.Context, e *env) ([]finding, error) {
	return queueFindings(ctx, e, r.queue, func(q queue.QueueInfo) (string, bool) {
		n := q.Counts[queue.StatusQueued]
		return fmt.Sprintf("queue %s holds %d queued jobs (limit %d)", q.Name, n, r.depth), n >= r.depth
	})
}

// queueFindings checks every queue (or the one named) with holds.
func queueFindings(ctx context.Context, e *env, only string, holds func(queue.QueueInfo) (string, bool)) ([]finding, error) {
	qs, err := e.c.Queues(ctx)
	if err != nil {
		return nil, err
	}
	var out []finding
	for _, q := range qs {
		if only != "" && q.Name != only {
			continue
		}
		if summary, ok := holds(q); ok {
			out = append(out, finding{key: q.Name, queue: q.Name, summary: summary})
		}
	}
	return out, nil
}

// OldestDueRule fires for each queue whose longest-waiting due job has
// waited longer than a limit; the key is the queue's name.
type OldestDueRule struct {
	named
	limit time.Duration
	queue string
}

// OldestDue returns a rule, named "oldest-due", that fires for each queue
// whose oldest due job has waited longer than limit.
func OldestDue(limit time.Duration) *OldestDueRule {
	return &OldestDueRule{named: named{"oldest-due"}, limit: limit}
}

// Named renames the rule.
func (r *OldestDueRule) Named(name string) *OldestDueRule { r.name = name; return r }

// Queue restricts the rule to one queue.
func (r *OldestDueRule) Queue(name string) *OldestDueRule { r.queue = name; return r }

func (r *OldestDueRule) validate() error {
	if r.limit <= 0 {
		return fmt.Errorf("%w: rule %q: OldestDue needs a positive limit", ErrInvalid, r.name)
	}
	return nil
}

func (r *OldestDueRule) check(ctx context.Context, e *env) ([]finding, error) {
	return queueFindings(ctx, e, r.queue, func(q queue.QueueInfo) (string, bool) {
		return fmt.Sprintf("queue %s: the oldest due job has waited %v (limit %v)", q.Name, q.OldestDue.Round(time.Second), r.limit),
			q.OldestDue > r.limit
	})
}

// MissedTickRule fires for each registered schedule with ticks that were
// due and did not fire (see queue.ScheduleState); the key is the
// schedule's name. It resolves when the schedule fires again.
type MissedTickRule struct{ named }

// MissedTick returns a rule, named "missed-tick", that fires for each
// schedule that missed a tick.
func MissedTick() *MissedTickRule { return &MissedTickRule{named{"missed-tick"}} }

// Named renames the rule.
func (r *MissedTickRule) Named(name string) *MissedTickRule { r.name = name; return r }

func (*MissedTickRule) validate() error { return nil }

func (r *MissedTickRule) check(ctx context.Context, e *env) ([]finding, error) {
	states, err := e.c.ScheduleStates(ctx)
	if err != nil {
		return nil, err
	}
	var out []finding
	for _, s := range states {
		if s.MissedTicks > 0 {
			out = append(out, finding{key: s.Name, summary: fmt.Sprintf("schedule %s missed %d tick(s), the latest due at %s",
				s.Name, s.MissedTicks, s.LatestMissed.Format(time.RFC3339))})
		}
	}
	return out, nil
}

// RunDeadlineRule fires for each run that started before the latest
// daily deadline (a local time of day) and has not finished: it still has
// QUEUED or PROCESSING jobs. The key is the run's ID; it resolves when the
// run finishes. It reads the runs whose first job was created in the 48
// hours before the deadline.
type RunDeadlineRule struct {
	named
	hour, minute int
	loc          *time.Location
	err          error
}

// RunDeadline returns a rule, named "run-deadline", for the deadline at,
// a time of day such as "05:00", in loc (nil: UTC).
func RunDeadline(at string, loc *time.Location) *RunDeadlineRule {
	r := &RunDeadlineRule{named: named{"run-deadline"}, loc: loc}
	if r.loc == nil {
		r.loc = time.UTC
	}
	r.hour, r.minute, r.err = parseClock(at)
	return r
}

// parseClock reads a time of day, "15:04".
func parseClock(at string) (hour, minute int, err error) {
	t, err := time.Parse("15:04", at)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: time of day %q is not hh:mm", ErrInvalid, at)
	}
	return t.Hour(), t.Minute(), nil
}

// latestAt returns the latest time of day hour:minute in loc at or before
// now.
func latestAt(now time.Time, hour, minute int, loc *time.Location) time.Time {
	l := now.In(loc)
	at := time.Date(l.Year(), l.Month(), l.Day(), hour, minute, 0, 0, loc)
	if at.After(now) {
		at = time.Date(l.Year(), l.Month(), l.Day()-1, hour, minute, 0, 0, loc)
	}
	return at
}

// Named renames the rule.
func (r *RunDeadlineRule) Named(name string) *RunDeadlineRule { r.name = name; return r }

func (r *RunDeadlineRule) validate() error { return r.err }

func (r *RunDeadlineRule) check(ctx context.Context, e *env) ([]finding, error) {
	deadline := latestAt(e.now, r.hour, r.minute, r.loc)
	runs, err := e.c.Runs(ctx, queue.RunsQuery{FirstFrom: deadline.Add(-48 * time.Hour), FirstBefore: deadline, Limit: 10_000})
	if err != nil {
		return nil, err
	}
	var out []finding
	for _, run := range runs {
		if open := run.Counts[queue.StatusQueued] + run.Counts[queue.StatusProcessing]; open > 0 {
			out = append(out, finding{key: run.RunID, summary: fmt.Sprintf("run %s has not finished by %s: %d of %d jobs still to do",
				run.RunID, deadline.Format("2006-01-02 15:04 MST"), open, run.Total)})
		}
	}
	return out, nil
}

// Defaults of SlowKind.
const (
	DefaultSlowDays    = 14
	DefaultSlowMinJobs = 5
	slowMinDays        = 3
)

// SlowKindRule fires for each kind, on each queue, whose p95 duration
// today (UTC) is above a factor times its usual: the median of the daily
// p95 over the days before (queue.Client.History), counting only days
// with completed jobs, and only when there are at least 3 of them and
// today has at least MinJobs completed jobs. The key is "kind on queue".
// It resolves when today's p95 comes back under, or a new day begins.
type SlowKindRule struct {
	named
	factor  float64
	days    int
	minJobs int64
	kinds   []string
}

// SlowKind returns a rule, named "slow-kind", that fires for a kind whose
// p95 today is above factor times its usual over the last
// DefaultSlowDays days.
func SlowKind(factor float64) *SlowKindRule {
	return &SlowKindRule{named: named{"slow-kind"}, factor: factor, days: DefaultSlowDays, minJobs: DefaultSlowMinJobs}
}

// Named renames the rule.
func (r *SlowKindRule) Named(name string) *SlowKindRule { r.name = name; return r }

// Days sets how many days before today make the usual p95.
func (r *SlowKindRule) Days(n int) *SlowKindRule { r.days = n; return r }

// MinJobs sets how many jobs must have completed today for its p95 to
// count. Default DefaultSlowMinJobs.
func (r *SlowKindRule) MinJobs(n int64) *SlowKindRule { r.minJobs = n; return r }

// Kinds restricts the rule to these kinds.
func (r *SlowKindRule) Kinds(kinds ...string) *SlowKindRule { r.kinds = kinds; return r }

func (r *SlowKindRule) validate() error {
	if r.factor <= 1 || r.days < slowMinDays || r.minJobs < 1 {
		return fmt.Errorf("%w: rule %q: SlowKind needs a factor above 1, at least %d days and at least 1 job", ErrInvalid, r.name, slowMinDays)
	}
	return nil
}

func (r *SlowKindRule) check(ctx context.Context, e *env) ([]finding, error) {
	now := e.now.UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	days, err := e.c.History(ctx, queue.HistoryQuery{From: today.AddDate(0, 0, -r.days), To: now})
	if err != nil {
		return nil, err
	}
	type series struct {
		past  []time.Duration
		today queue.DayStats
	}
	byKey := map[[2]string]*series{}
	var order [][2]string
	for _, d := range days {
		if d.Completed == 0 || len(r.kinds) > 0 && !slices.Contains(r.kinds, d.Kind) {
			continue
		}
		k := [2]string{d.Kind, d.Queue}
		s := byKey[k]
		if s == nil {
			s = &series{}
			byKey[k] = s
			order = append(order, k)
		}
		if d.Day.Equal(today) {
			s.today = d
		} else if d.Day.Before(today) {
			s.past = append(s.past, d.P95)
		}
	}
	var out []finding
	for _, k := range order {
		s := byKey[k]
		if len(s.past) < slowMinDays || s.today.Completed < r.minJobs {
			continue
		}
		slices.Sort(s.past)
		usual := s.past[len(s.past)/2]
		if len(s.past)%2 == 0 {
			usual = (s.past[len(s.past)/2-1] + usual) / 2
		}
		if float64(s.today.P95) > r.factor*float64(usual) {
			out = append(out, finding{key: k[0] + " on " + k[1], kind: k[0], queue: k[1],
				summary: fmt.Sprintf("%s on %s: p95 today %v, usually %v (over %d days)", k[0], k[1],
					s.today.P95.Round(time.Millisecond), usual.Round(time.Millisecond), len(s.past))})
		}
	}
	return out, nil
}
