// Package limit holds the logic of the queue's limits across runners: the
// checks of a limit, a kind's partition key, the limits a registration
// declares and how a limit's use reads. The queue package declares the
// types users see and their documentation; the store enforces the limits
// in its claims.
package limit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Declared is a limit a registration declares for its kind (queue's
// KindLimit and KeyLimit): Scope is store.ScopeKind or store.ScopeKey.
type Declared struct {
	Scope       string
	Concurrency int
	Rate        int
	Per         time.Duration
	Fair        bool
	Weights     map[string]int
}

// MaxWeight is the most a key of fair share may weigh.
const MaxWeight = 1000

// Check refuses a limit that sets neither a concurrency, nor a rate, nor
// fair share, a rate without a period of at least a millisecond, fair
// share on a scope other than store.ScopeKey, or weights without fair
// share, of keys that are not text or outside [1, MaxWeight].
func Check(l store.Limit) error {
	switch {
	case l.Concurrency < 0 || l.Rate < 0:
		return check.Invalid("limit of %d running and %d started is negative", l.Concurrency, l.Rate)
	case l.Fair && l.Scope != store.ScopeKey:
		return check.Invalid("fair share is among the keys of a kind: a %s limit has none", l.Scope)
	case l.Concurrency == 0 && l.Rate == 0 && !l.Fair:
		return check.Invalid("limit sets neither a concurrency, nor a rate, nor fair share")
	case l.Rate > 0 && l.Period < time.Millisecond:
		return check.Invalid("rate limit per %v: the period must be at least a millisecond", l.Period)
	case l.Rate == 0 && l.Period != 0:
		return check.Invalid("period %v without a rate", l.Period)
	case len(l.Weights) > 0 && !l.Fair:
		return check.Invalid("weights without fair share weigh nothing")
	}
	for _, k := range slices.Sorted(maps.Keys(l.Weights)) {
		if err := check.Text("weight's key", k); err != nil {
			return err
		}
		if err := check.Within(fmt.Sprintf("weight of key %q", k), l.Weights[k], 1, MaxWeight); err != nil {
			return err
		}
	}
	return nil
}

// CheckSet refuses what SetLimit must not write: a limit that is not one,
// of a scope that is none, or by someone whose name is not text.
func CheckSet(l store.Limit) error {
	var err error
	switch l.Scope {
	case store.ScopeKind, store.ScopeKey:
		err = check.Name("SetLimit", "kind", l.Target, 200)
	case store.ScopeQueue:
		err = check.QueueName("SetLimit", l.Target)
	default:
		err = check.Invalid("limit scope %q is none of kind, queue and key", l.Scope)
	}
	if err == nil {
		err = Check(l)
	}
	if err == nil {
		err = check.Text("By", l.ChangedBy)
	}
	return err
}

// Key computes a job's partition key from its payload; nil for a kind
// without one.
type Key func(payload []byte) (string, error)

// KeyOf is the Key that decodes a payload into A and calls key.
func KeyOf[A any](key func(A) string) (Key, error) {
	if key == nil {
		return nil, check.Invalid("nil key function")
	}
	return func(payload []byte) (string, error) {
		var args A
		if err := json.Unmarshal(payload, &args); err != nil {
			return "", fmt.Errorf("%w: %v", check.ErrInvalidPayload, err)
		}
		k := key(args)
		return k, check.Text("limit key", k)
	}, nil
}

// Of is the partition key of a job with payload, or nil when the kind has
// no key function.
func (k Key) Of(payload []byte) (*string, error) {
	if k == nil {
		return nil, nil
	}
	s, err := k(payload)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// Declare writes the limits the kinds declare (kind name to its limits),
// leaving those an operator set alone (see store.Store's SetLimit).
func Declare(ctx context.Context, st store.Store, db *gorm.DB, kinds map[string][]Declared) error {
	for kind, ds := range kinds {
		for _, d := range ds {
			l := store.Limit{Scope: d.Scope, Target: kind, Concurrency: d.Concurrency, Rate: d.Rate, Period: d.Per, Fair: d.Fair,
				Weights: d.Weights}
			if _, err := st.SetLimit(ctx, db, l); err != nil {
				return fmt.Errorf("queue: declare the limit of %s %q: %w", l.Scope, l.Target, err)
			}
		}
	}
	return nil
}

// Remove removes the limit of scope and target, or returns an error
// wrapping none when there is none.
func Remove(ctx context.Context, st store.Store, db *gorm.DB, scope, target string, none error) error {
	err := st.RemoveLimit(ctx, db, scope, target)
	if errors.Is(err, store.ErrNoLimit) {
		return fmt.Errorf("%w: %s %q", none, scope, target)
	}
	return check.Failed(ctx, fmt.Sprintf("RemoveLimit %s %q", scope, target), err)
}

// Read returns every limit with its use, each as out makes it.
func Read[U any](ctx context.Context, st store.Store, db *gorm.DB, out func(store.LimitUse) U) ([]U, error) {
	ls, err := st.Limits(ctx, db)
	if err != nil || ls == nil {
		return nil, check.Failed(ctx, "limits", err)
	}
	us := make([]U, len(ls))
	for i, l := range ls {
		us[i] = out(l)
	}
	return us, nil
}

// Use is a limit with its use, as queue's LimitUse reads it.
type Use struct {
	Scope, Target, Key string
	Concurrency, Rate  int
	Per                time.Duration
	Suspended, Fair    bool
	Running, Started   int
}

// Reached reports whether the limit allows no more starts now.
func (u Use) Reached() bool {
	return !u.Suspended && (u.Concurrency > 0 && u.Running >= u.Concurrency || u.Rate > 0 && u.Started >= u.Rate)
}

// String says what the limit is and how far it is used, as "limit kind
// report reached (5 of 5 running)".
func (u Use) String() string {
	target := u.Scope + " " + u.Target
	if u.Scope == store.ScopeKey {
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
		use = append(use, fmt.Sprintf("%d of %d started in %s", u.Started, u.Rate, period(u.Per)))
	}
	if u.Fair {
		use = append(use, fmt.Sprintf("fair share, %d running", u.Running))
	}
	return "limit " + target + " " + state + " (" + strings.Join(use, ", ") + ")"
}

// period writes d as a person would say it: 1m, not 1m0s; 1h30m, not
// 1h30m0s.
func period(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
