package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// LimitScope is what a Limit counts.
type LimitScope string

// The scopes of a limit.
const (
	// ScopeKind counts the jobs of one kind.
	ScopeKind LimitScope = store.ScopeKind
	// ScopeQueue counts the jobs of one queue, whatever their kind.
	ScopeQueue LimitScope = store.ScopeQueue
	// ScopeKey counts the jobs of one kind with the same partition key
	// (see KeyLimit), each key apart: a limit of 2 lets two jobs of every
	// key run at once. Jobs enqueued without a key share the key "".
	ScopeKey LimitScope = store.ScopeKey
)

// Limit caps the jobs of a scope across every runner and process: at most
// Concurrency running at once, and at most Rate started in any span of
// Per. Zero Concurrency or Rate is no limit of that sort; a Limit has at
// least one. Runners never claim a job a limit forbids; the others of its
// queue are claimed past it, by priority as ever. See Limits in the
// package documentation.
type Limit struct {
	Scope LimitScope
	// Target is the kind (ScopeKind, ScopeKey) or the queue (ScopeQueue).
	Target      string
	Concurrency int
	Rate        int
	Per         time.Duration
	// Suspended keeps the limit without enforcing it.
	Suspended bool
	// By names who set the limit, for SetLimit: "client" if empty. A
	// limit declared at registration (KindLimit, KeyLimit) has none, and
	// does not replace one set with SetLimit.
	By string
}

// Limits caps a kind's jobs, for KindLimit and KeyLimit: at most
// Concurrency running at once, at most Rate started in any span of Per.
type Limits struct {
	Concurrency int
	Rate        int
	Per         time.Duration
}

// LimitUse is a limit with its use now, as Client.Limits reads it.
type LimitUse struct {
	Limit
	ChangedAt time.Time
	// Running and Started are the jobs of the scope running now, and
	// started in the last Per; for ScopeKey, of its busiest key, Key.
	Running, Started int
	Key              string
	// Keys is, for ScopeKey, the use of every key with jobs running or
	// started in the last Per, busiest first.
	Keys []KeyUse
}

// KeyUse is the use of one partition key of a ScopeKey limit.
type KeyUse struct {
	Key              string
	Running, Started int
}

// Reached reports whether the limit allows no more starts now: as many
// running as its Concurrency, or as many started in the last Per as its
// Rate (for ScopeKey, in its busiest key).
func (u LimitUse) Reached() bool {
	return !u.Suspended && (u.Concurrency > 0 && u.Running >= u.Concurrency || u.Rate > 0 && u.Started >= u.Rate)
}

// String says what the limit is and how far it is used, as "limit kind
// report reached (5 of 5 running)".
func (u LimitUse) String() string {
	target := string(u.Scope) + " " + u.Target
	if u.Scope == ScopeKey {
		target += fmt.Sprintf(" key %q", u.Key)
	}
	state := "in use"
	switch {
	case u.Suspended:
		state = "suspended"
	case u.Reached():
		state = "reached"
	}
	var use []string
	if u.Concurrency > 0 {
		use = append(use, fmt.Sprintf("%d of %d running", u.Running, u.Concurrency))
	}
	if u.Rate > 0 {
		use = append(use, fmt.Sprintf("%d of %d started in %v", u.Started, u.Rate, u.Per))
	}
	s := "limit " + target + " " + state + " ("
	for i, x := range use {
		if i > 0 {
			s += ", "
		}
		s += x
	}
	return s + ")"
}

// check refuses a limit that is not one.
func (l Limit) check() error {
	switch l.Scope {
	case ScopeKind, ScopeKey:
		if err := check.Name("SetLimit", "kind", l.Target, 200); err != nil {
			return err
		}
	case ScopeQueue:
		if err := check.QueueName("SetLimit", l.Target); err != nil {
			return err
		}
	default:
		return check.Invalid("limit scope %q is none of kind, queue and key", l.Scope)
	}
	return Limits{l.Concurrency, l.Rate, l.Per}.check()
}

func (l Limits) check() error {
	switch {
	case l.Concurrency < 0 || l.Rate < 0:
		return check.Invalid("limit of %d running and %d started is negative", l.Concurrency, l.Rate)
	case l.Concurrency == 0 && l.Rate == 0:
		return check.Invalid("limit sets neither a concurrency nor a rate")
	case l.Rate > 0 && l.Per < time.Millisecond:
		return check.Invalid("rate limit per %v: the period must be at least a millisecond", l.Per)
	case l.Rate == 0 && l.Per != 0:
		return check.Invalid("period %v without a rate", l.Per)
	}
	return nil
}

// KindLimit caps the kind's jobs across every runner (see Limit, scope
// ScopeKind). Runners write it when they start, unless SetLimit set the
// kind's limit: then that one stands until RemoveLimit.
func KindLimit(l Limits) RegisterOption {
	return kindOption(func(o *jobOptions) error {
		if err := l.check(); err != nil {
			return err
		}
		o.limits = append(o.limits, declared{ScopeKind, l})
		return nil
	})
}

// KeyLimit caps the kind's jobs of each partition key across every runner
// (see Limit, scope ScopeKey): key computes a job's key from its args when
// it is enqueued, and is stored with it. Declared as KindLimit is.
func KeyLimit[A Args](key func(A) string, l Limits) RegisterOption {
	return kindOption(func(o *jobOptions) error {
		if key == nil {
			return check.Invalid("nil key function")
		}
		if err := l.check(); err != nil {
			return err
		}
		o.limits = append(o.limits, declared{ScopeKey, l})
		o.limitKey = func(payload []byte) (string, error) {
			var args A
			if err := json.Unmarshal(payload, &args); err != nil {
				return "", fmt.Errorf("%w: %v", ErrInvalidPayload, err)
			}
			k := key(args)
			return k, check.Text("limit key", k)
		}
		return nil
	})
}

// declared is a limit a registration declares for its kind.
type declared struct {
	scope LimitScope
	Limits
}

// limitKeyOf is the partition key of a job with payload, of a kind whose
// defaults are o, or nil when the kind has no key function.
func limitKeyOf(o *jobOptions, payload []byte) (*string, error) {
	if o.limitKey == nil {
		return nil, nil
	}
	k, err := o.limitKey(payload)
	if err != nil {
		return nil, err
	}
	return &k, nil
}

// SetLimit sets the limit of l.Scope and l.Target, replacing any; runners
// in every process apply it within a poll interval. Errors wrap
// ErrInvalidOption for a limit that is not one.
func (c *ops) SetLimit(ctx context.Context, l Limit) error {
	if err := l.check(); err != nil {
		return err
	}
	if l.By == "" {
		l.By = "client"
	}
	if err := check.Text("By", l.By); err != nil {
		return err
	}
	_, err := c.st.SetLimit(ctx, c.db, store.Limit{Scope: string(l.Scope), Target: l.Target, Concurrency: l.Concurrency,
		Rate: l.Rate, Period: l.Per, Suspended: l.Suspended, ChangedBy: l.By})
	return check.Failed(fmt.Sprintf("SetLimit %s %q", l.Scope, l.Target), err)
}

// ErrLimitsUnsupported is returned by SetLimit, and by a runner's Start
// when its kinds declare limits, on a database that does not enforce them:
// MariaDB and MySQL, for now.
var ErrLimitsUnsupported = store.ErrLimitsUnsupported

// ErrNoLimit is returned by RemoveLimit for a limit that does not exist.
var ErrNoLimit = errors.New("queue: no such limit")

// RemoveLimit removes the limit of scope and target; a runner that
// declares it writes it again when it starts. It returns ErrNoLimit when
// there is none.
func (c *ops) RemoveLimit(ctx context.Context, scope LimitScope, target string) error {
	err := c.st.RemoveLimit(ctx, c.db, string(scope), target)
	if errors.Is(err, store.ErrNoLimit) {
		return fmt.Errorf("%w: %s %q", ErrNoLimit, scope, target)
	}
	return check.Failed(fmt.Sprintf("RemoveLimit %s %q", scope, target), err)
}

// Limits returns every limit with its use now, by scope and target.
func (c *ops) Limits(ctx context.Context) ([]LimitUse, error) {
	ls, err := c.st.Limits(ctx, c.db)
	if err != nil {
		return nil, check.Failed("limits", err)
	}
	return converted(ls, func(u store.LimitUse) LimitUse {
		out := LimitUse{Limit: Limit{Scope: LimitScope(u.Scope), Target: u.Target, Concurrency: u.Concurrency, Rate: u.Rate,
			Per: u.Period, Suspended: u.Suspended, By: u.ChangedBy}, ChangedAt: u.ChangedAt,
			Running: u.Running, Started: u.Started, Key: u.Key}
		out.Keys = converted(u.Keys, func(k store.KeyUse) KeyUse { return KeyUse(k) })
		return out
	}), nil
}

// declareLimits writes the limits the registry's kinds declare, leaving
// those SetLimit set alone.
func (c *ops) declareLimits(ctx context.Context) error {
	var ls []store.Limit
	for _, e := range c.reg.r.All {
		for _, d := range e.Defaults.limits {
			ls = append(ls, store.Limit{Scope: string(d.scope), Target: e.Name, Concurrency: d.Concurrency, Rate: d.Rate, Period: d.Per})
		}
	}
	for _, l := range ls {
		if _, err := c.st.SetLimit(ctx, c.db, l); err != nil {
			return fmt.Errorf("queue: declare the limit of %s %q: %w", l.Scope, l.Target, err)
		}
	}
	return nil
}
