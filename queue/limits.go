package queue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/limit"
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
// least one, or Fair. Runners never claim a job a limit forbids; the
// others of its queue are claimed past it, by priority as ever. See
// "Concurrency and rate limits" in the package documentation.
type Limit struct {
	Scope LimitScope
	// Target is the kind (ScopeKind, ScopeKey) or the queue (ScopeQueue).
	Target      string
	Concurrency int
	Rate        int
	Per         time.Duration
	// Fair, for ScopeKey only, makes claims take turns among the kind's
	// keys: see "Fair share" in the package documentation.
	Fair bool
	// Weights, with Fair, gives some keys more turns: a key of weight 3
	// gets three claims to a key of weight 1's one. A key not in it
	// weighs 1; a weight is from 1 to 1,000.
	Weights map[string]int
	// Suspended keeps the limit without enforcing it.
	Suspended bool
	// By names who set the limit, for SetLimit: "client" if empty. A
	// limit declared at registration (KindLimit, KeyLimit) has none, and
	// does not replace one set with SetLimit.
	By string
}

// Limits caps a kind's jobs, for KindLimit and KeyLimit: at most
// Concurrency running at once, at most Rate started in any span of Per.
// Fair, for KeyLimit only, makes claims take turns among the keys, with or
// without a cap, Weights giving some keys more turns (see Limit.Weights).
type Limits struct {
	Concurrency int
	Rate        int
	Per         time.Duration
	Fair        bool
	Weights     map[string]int
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

func (l Limits) declared() limit.Declared {
	return limit.Declared{Concurrency: l.Concurrency, Rate: l.Rate, Per: l.Per, Fair: l.Fair, Weights: maps.Clone(l.Weights)}
}

// KeyUse is the use of one partition key of a ScopeKey limit.
type KeyUse struct {
	Key              string
	Running, Started int
}

// Reached reports whether the limit allows no more starts now: as many
// running as its Concurrency, or as many started in the last Per as its
// Rate (for ScopeKey, in its busiest key).
func (u LimitUse) Reached() bool { return u.use().Reached() }

// String says what the limit is and how far it is used, as "limit kind
// report reached (5 of 5 running)".
func (u LimitUse) String() string { return u.use().String() }

func (u LimitUse) use() limit.Use {
	return limit.Use{Scope: string(u.Scope), Target: u.Target, Key: u.Key, Concurrency: u.Concurrency, Rate: u.Rate, Per: u.Per,
		Suspended: u.Suspended, Fair: u.Fair, Running: u.Running, Started: u.Started}
}

// KindLimit caps the kind's jobs across every runner (see Limit, scope
// ScopeKind). Runners write it when they start, unless SetLimit set the
// kind's limit: then that one stands until RemoveLimit.
func KindLimit(l Limits) RegisterOption {
	return kindOption(func(o *jobOptions) error { return o.Declare(store.ScopeKind, l.declared()) })
}

// KeyLimit caps the kind's jobs of each partition key across every runner
// (see Limit, scope ScopeKey): key computes a job's key from its args when
// it is enqueued, and is stored with it. Declared as KindLimit is.
func KeyLimit[A Args](key func(A) string, l Limits) RegisterOption {
	return kindOption(func(o *jobOptions) (err error) {
		if o.LimitKey, err = limit.KeyOf(key); err != nil {
			return err
		}
		return o.Declare(store.ScopeKey, l.declared())
	})
}

// SetLimit sets the limit of l.Scope and l.Target, replacing any; runners
// in every process apply it within a poll interval. Errors wrap
// ErrInvalidOption for a limit that is not one.
func (c *ops) SetLimit(ctx context.Context, l Limit) error {
	if l.By == "" {
		l.By = "client"
	}
	sl := store.Limit{Scope: string(l.Scope), Target: l.Target, Concurrency: l.Concurrency, Rate: l.Rate, Period: l.Per,
		Fair: l.Fair, Weights: l.Weights, Suspended: l.Suspended, ChangedBy: l.By}
	if err := limit.CheckSet(sl); err != nil {
		return err
	}
	_, err := c.st.SetLimit(ctx, c.db, sl)
	return check.Failed(ctx, fmt.Sprintf("SetLimit %s %q", l.Scope, l.Target), err)
}

// ErrNoLimit is returned by RemoveLimit for a limit that does not exist.
var ErrNoLimit = errors.New("queue: no such limit")

// RemoveLimit removes the limit of scope and target; a runner that
// declares it writes it again when it starts. It returns ErrNoLimit when
// there is none.
func (c *ops) RemoveLimit(ctx context.Context, scope LimitScope, target string) error {
	return limit.Remove(ctx, c.st, c.db, string(scope), target, ErrNoLimit)
}

// Limits returns every limit with its use now, by scope and target.
func (c *ops) Limits(ctx context.Context) ([]LimitUse, error) {
	return limit.Read(ctx, c.st, c.db, func(u store.LimitUse) LimitUse {
		return LimitUse{Limit: Limit{Scope: LimitScope(u.Scope), Target: u.Target, Concurrency: u.Concurrency, Rate: u.Rate,
			Per: u.Period, Fair: u.Fair, Weights: u.Weights, Suspended: u.Suspended, By: u.ChangedBy}, ChangedAt: u.ChangedAt,
			Running: u.Running, Started: u.Started, Key: u.Key, Keys: converted(u.Keys, func(k store.KeyUse) KeyUse { return KeyUse(k) })}
	})
}

// declareLimits writes the limits the registry's kinds declare, leaving
// those SetLimit set alone.
func (c *ops) declareLimits(ctx context.Context) error {
	kinds := map[string][]limit.Declared{}
	for _, e := range c.reg.r.All {
		kinds[e.Name] = e.Defaults.Limits
	}
	return limit.Declare(ctx, c.st, c.db, kinds)
}
