package alert

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/internal/access"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

var (
	// ErrInvalid is wrapped by errors about options, rules and arguments.
	ErrInvalid = errors.New("alert: invalid")
	// ErrNotFound is returned for a silence that does not exist.
	ErrNotFound = errors.New("alert: not found")
)

// Defaults of an Alerter.
const (
	// DefaultInterval is how often Run asks to be run again.
	DefaultInterval = time.Minute
	// DefaultRetryBackoff is the wait before a notice whose send failed is
	// sent again; it doubles with each failure, up to DefaultRetryMax.
	DefaultRetryBackoff = 30 * time.Second
	DefaultRetryMax     = time.Hour
	// digestGrace is how late a digest is still sent, when no alerter ran
	// at its time.
	digestGrace = 6 * time.Hour
	// sendBatch bounds the notices one Run sends.
	sendBatch = 100
)

// Alerter checks its rules, keeps their episodes in the database, and
// sends notices to its sinks. It is a piece of the queue's periodic
// upkeep: give it to a runner with queue.WithMaintenance, whose elected
// leader runs it, so that one process sends each notice; or call Run
// yourself on a timer. It is safe for concurrent use, and two Alerters on
// one database that run at once still record each episode once and send
// each notice once to each sink (a crash between a send and its record
// aside; see Run).
type Alerter struct {
	c      *queue.Client
	db     *gorm.DB
	st     store.Store
	rules  []Rule
	sinks  map[string]Sink
	names  []string // of sinks, sorted
	cfg    config
	digest *digest
}

type config struct {
	interval          time.Duration
	backoff, maxRetry time.Duration
	now               func() time.Time
	logger            *slog.Logger
}

type digest struct {
	hour, minute int
	loc          *time.Location
}

// Option configures an Alerter.
type Option interface{ apply(*Alerter) error }

type optionFunc func(*Alerter) error

func (f optionFunc) apply(a *Alerter) error { return f(a) }

// WithRules adds rules. Their names must be unique.
func WithRules(rules ...Rule) Option {
	return optionFunc(func(a *Alerter) error {
		for _, r := range rules {
			if r == nil {
				return fmt.Errorf("%w: nil rule", ErrInvalid)
			}
			if err := r.validate(); err != nil {
				return err
			}
			if r.Name() == "" || strings.ContainsRune(r.Name(), 0) || !utf8.ValidString(r.Name()) {
				return fmt.Errorf("%w: rule name %q", ErrInvalid, r.Name())
			}
			if r.Name() == TypeDigest {
				return fmt.Errorf("%w: rule name %q is the digest's", ErrInvalid, r.Name())
			}
			if slices.ContainsFunc(a.rules, func(o Rule) bool { return o.Name() == r.Name() }) {
				return fmt.Errorf("%w: two rules named %q", ErrInvalid, r.Name())
			}
			a.rules = append(a.rules, r)
		}
		return nil
	})
}

// WithSink adds a sink, under a name unique among the Alerter's sinks.
// Every notice goes to every sink; each sink's copy is sent, and retried,
// on its own. The name is kept with the notices owed to it: a sink renamed
// or removed leaves those unsent in the database.
func WithSink(name string, s Sink) Option {
	return optionFunc(func(a *Alerter) error {
		switch {
		case s == nil:
			return fmt.Errorf("%w: sink %q is nil", ErrInvalid, name)
		case name == "" || strings.ContainsRune(name, 0):
			return fmt.Errorf("%w: sink name %q", ErrInvalid, name)
		case a.sinks[name] != nil:
			return fmt.Errorf("%w: two sinks named %q", ErrInvalid, name)
		}
		a.sinks[name] = s
		return nil
	})
}

// WithDigest sends, every day at the time of day at ("07:00") in loc (nil:
// UTC), the review of the 24 hours before as one notice of TypeDigest:
// jobs by status, failures, slow jobs, jobs that never ran, missed ticks
// and stopped chains. It is sent once per day however many Alerters run;
// an Alerter that starts up to six hours after the time sends that day's.
func WithDigest(at string, loc *time.Location) Option {
	return optionFunc(func(a *Alerter) error {
		h, m, err := parseClock(at)
		if err != nil {
			return err
		}
		if loc == nil {
			loc = time.UTC
		}
		a.digest = &digest{hour: h, minute: m, loc: loc}
		return nil
	})
}

// WithInterval sets how long Run asks to wait before the next round
// (sooner when a notice is due to be retried). Default DefaultInterval.
func WithInterval(d time.Duration) Option {
	return optionFunc(func(a *Alerter) error {
		if d <= 0 {
			return fmt.Errorf("%w: interval %v is not positive", ErrInvalid, d)
		}
		a.cfg.interval = d
		return nil
	})
}

// WithRetryBackoff sets the wait before a failed notice is sent again,
// doubling with each failure up to most. Defaults DefaultRetryBackoff and
// DefaultRetryMax. A notice is retried until it is sent.
func WithRetryBackoff(first, most time.Duration) Option {
	return optionFunc(func(a *Alerter) error {
		if first <= 0 || most < first {
			return fmt.Errorf("%w: retry backoff %v up to %v", ErrInvalid, first, most)
		}
		a.cfg.backoff, a.cfg.maxRetry = first, most
		return nil
	})
}

// WithClock sets the clock the Alerter reckons episodes, silences and the
// digest by; default time.Now. Tests move it.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(a *Alerter) error {
		if now == nil {
			return fmt.Errorf("%w: nil clock", ErrInvalid)
		}
		a.cfg.now = now
		return nil
	})
}

// WithLogger sets the logger of failed rules and sends; default
// slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(a *Alerter) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalid)
		}
		a.cfg.logger = l
		return nil
	})
}

// New returns an Alerter for the jobs of client, which must be migrated
// to schema version 10 or later before Run. It starts nothing.
func New(client *queue.Client, opts ...Option) (*Alerter, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalid)
	}
	a := &Alerter{c: client, sinks: map[string]Sink{}, cfg: config{
		interval: DefaultInterval, backoff: DefaultRetryBackoff, maxRetry: DefaultRetryMax, now: time.Now, logger: slog.Default(),
	}}
	a.db, a.st = access.Client(client)
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", ErrInvalid)
		}
		if err := o.apply(a); err != nil {
			return nil, err
		}
	}
	for name := range a.sinks {
		a.names = append(a.names, name)
	}
	slices.Sort(a.names)
	return a, nil
}

// Name names the task: "alerts".
func (*Alerter) Name() string { return "alerts" }

// Run does one round: it checks every rule, records what began, fired and
// ended, then sends the notices that are due, and returns how long to wait
// before the next round. A change of an episode and the notices it owes
// are recorded in one transaction; a notice is marked sent after its sink
// accepted it. A crash between the two sends it again, with the same
// EventID, so receivers drop duplicates by EventID. A rule that fails
// (its read of the database failed) leaves its episodes as they were; its
// error is logged and returned, joined with the others, after the round
// has done what it could.
func (a *Alerter) Run(ctx context.Context) (time.Duration, error) {
	now := a.cfg.now()
	errs := a.evaluate(ctx, now)
	if err := a.sendDigest(ctx, now); err != nil {
		errs = append(errs, err)
	}
	if err := a.deliver(ctx, now); err != nil {
		errs = append(errs, err)
	}
	next := a.cfg.interval
	if at, ok, err := store.NextNotice(ctx, a.db); err != nil {
		errs = append(errs, fmt.Errorf("alert: %w", err))
	} else if ok {
		next = min(next, max(at.Sub(a.cfg.now()), time.Second))
	}
	return next, errors.Join(errs...)
}

// evaluate checks the rules and moves their episodes on.
func (a *Alerter) evaluate(ctx context.Context, now time.Time) []error {
	open, err := store.OpenEpisodes(ctx, a.db)
	if err != nil {
		return []error{fmt.Errorf("alert: read episodes: %w", err)}
	}
	silences, err := store.Silences(ctx, a.st, a.db, now)
	if err != nil {
		return []error{fmt.Errorf("alert: read silences: %w", err)}
	}
	byKey := map[[2]string]store.AlertEpisode{}
	for _, ep := range open {
		byKey[[2]string{ep.Rule, ep.Key}] = ep
	}
	e := &env{c: a.c, now: now}
	var errs []error
	for _, r := range a.rules {
		if err := a.evaluateRule(ctx, e, r, byKey, silences); err != nil {
			a.cfg.logger.ErrorContext(ctx, "alert: rule failed", "rule", r.Name(), "err", err)
			errs = append(errs, fmt.Errorf("alert: rule %q: %w", r.Name(), err))
		}
	}
	return errs
}

func (a *Alerter) evaluateRule(ctx context.Context, e *env, r Rule, open map[[2]string]store.AlertEpisode, silences []store.AlertSilence) error {
	e.open = e.open[:0]
	for k := range open {
		if k[0] == r.Name() {
			e.open = append(e.open, k[1])
		}
	}
	found, err := r.check(ctx, e)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, f := range found {
		if seen[f.key] {
			continue
		}
		seen[f.key] = true
		ep, ok := open[[2]string{r.Name(), f.key}]
		if !ok {
			ep = store.AlertEpisode{Rule: r.Name(), Key: f.key, State: store.EpisodePending, Kind: f.kind, Queue: f.queue,
				Summary: f.summary, StartedAt: e.now}
			if ep.ID, err = store.InsertEpisode(ctx, a.st, a.db, ep, nil); err != nil {
				return err
			}
			if ep.ID == 0 {
				continue // another alerter opened it meanwhile
			}
		}
		if err := a.advance(ctx, e.now, r, ep, f.summary, silenced(ep, silences)); err != nil {
			return err
		}
	}
	for k, ep := range open {
		if k[0] == r.Name() && !seen[k[1]] {
			if err := a.resolve(ctx, e.now, ep); err != nil {
				return err
			}
		}
	}
	return nil
}

// advance moves an open episode whose condition holds: a pending one fires
// once it has held long enough, and a firing one not yet notified (it was
// silenced) is notified once no silence covers it.
func (a *Alerter) advance(ctx context.Context, now time.Time, r Rule, ep store.AlertEpisode, summary string, muted bool) error {
	was, wasNotified := ep.State, ep.Notified
	switch {
	case ep.State == store.EpisodePending && now.Sub(ep.StartedAt) >= r.hold():
		ep.State, ep.FiredAt, ep.Summary = store.EpisodeFiring, &now, summary
	case ep.State == store.EpisodeFiring && !ep.Notified:
	default:
		return nil
	}
	if muted {
		if was == ep.State {
			return nil
		}
		_, err := store.UpdateEpisode(ctx, a.st, a.db, ep, was, wasNotified, nil)
		return err
	}
	ep.Notified = true
	notices, err := a.notices(ep, TypeFiring, now, "")
	if err != nil {
		return err
	}
	_, err = store.UpdateEpisode(ctx, a.st, a.db, ep, was, wasNotified, notices)
	return err
}

// resolve ends an open episode whose condition no longer holds, with a
// notice if its firing was notified.
func (a *Alerter) resolve(ctx context.Context, now time.Time, ep store.AlertEpisode) error {
	was := ep.State
	ep.State, ep.ResolvedAt = store.EpisodeResolved, &now
	var notices []store.AlertNotice
	if ep.Notified {
		var err error
		if notices, err = a.notices(ep, TypeResolved, now, ""); err != nil {
			return err
		}
	}
	_, err := store.UpdateEpisode(ctx, a.st, a.db, ep, was, ep.Notified, notices)
	return err
}

// silenced reports whether a silence covers ep.
func silenced(ep store.AlertEpisode, silences []store.AlertSilence) bool {
	return slices.ContainsFunc(silences, func(s store.AlertSilence) bool {
		return s.Rule == ep.Rule && (s.Kind == "" || s.Kind == ep.Kind) && (s.Queue == "" || s.Queue == ep.Queue)
	})
}

// notices builds the notice of ep's change of type typ, one per sink,
// under a new event ID.
func (a *Alerter) notices(ep store.AlertEpisode, typ string, now time.Time, text string) ([]store.AlertNotice, error) {
	var id [16]byte
	_, _ = rand.Read(id[:]) // never fails
	n := Notice{EventID: hex.EncodeToString(id[:]), Type: typ, Rule: ep.Rule, Key: ep.Key, Kind: ep.Kind, Queue: ep.Queue,
		Summary: ep.Summary, Text: text, EpisodeID: ep.ID, StartedAt: ep.StartedAt.UTC(), At: now.UTC()}
	body, err := json.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("alert: %w", err)
	}
	out := make([]store.AlertNotice, 0, len(a.names))
	for _, name := range a.names {
		out = append(out, store.AlertNotice{EventID: n.EventID, Sink: name, Body: body, CreatedAt: now, NextAt: now})
	}
	return out, nil
}

// deliver sends the notices due, each to its sink. One that fails is
// tried again after a backoff; none is dropped.
func (a *Alerter) deliver(ctx context.Context, now time.Time) error {
	due, err := store.DueNotices(ctx, a.st, a.db, now, sendBatch)
	if err != nil {
		return fmt.Errorf("alert: read notices: %w", err)
	}
	var errs []error
	for _, n := range due {
		sink := a.sinks[n.Sink]
		if sink == nil {
			continue // a sink this alerter does not have; another may
		}
		var notice Notice
		if err := json.Unmarshal(n.Body, &notice); err != nil {
			errs = append(errs, fmt.Errorf("alert: notice %d: %w", n.ID, err))
			continue
		}
		wait := min(a.cfg.backoff<<min(n.Attempts, 20), a.cfg.maxRetry)
		took, err := store.ClaimNotice(ctx, a.st, a.db, n, now.Add(wait))
		if err != nil {
			errs = append(errs, fmt.Errorf("alert: claim notice %d: %w", n.ID, err))
			continue
		}
		if !took {
			continue
		}
		if err := sink.Send(ctx, notice); err != nil {
			a.cfg.logger.WarnContext(ctx, "alert: send failed", "sink", n.Sink, "event", notice.EventID, "attempt", n.Attempts+1,
				"retry_in", wait, "err", err)
			errs = append(errs, fmt.Errorf("alert: sink %q: %w", n.Sink, err))
			if err := store.NoticeFailed(context.WithoutCancel(ctx), a.st, a.db, n.ID, err.Error()); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		// Marked on a context the caller's cancellation does not cancel:
		// a notice sent and not marked goes out again.
		if err := store.NoticeSent(context.WithoutCancel(ctx), a.st, a.db, n.ID, a.cfg.now()); err != nil {
			errs = append(errs, fmt.Errorf("alert: mark notice %d sent: %w", n.ID, err))
		}
	}
	return errors.Join(errs...)
}
