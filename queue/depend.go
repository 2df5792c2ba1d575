package queue

import (
	"context"
	"log/slog"
	"reflect"
	"slices"

	"github.com/sheaf-dev/sheaf/queue/internal/registry"
	"github.com/sheaf-dev/sheaf/queue/internal/release"
	"github.com/sheaf-dev/sheaf/queue/internal/runner"
)

// A Rule releases a child job when its parent jobs complete.
//
// A one-to-one rule (Each) has one parent kind: every job of that kind that
// completes releases a child of its own, as a county report releases that
// county's summary. A many-to-one rule waits, per period, for every job of
// every parent kind in the period to complete, and then releases one child,
// as the weekly and monthly reports of a night release the consolidated
// report. Jobs get their period from the schedule tick that created them
// (or InPeriod); a many-to-one rule ignores jobs without one.
//
// A child is released in the same transaction that completes its last
// parent, and at most once per rule and parent (one-to-one) or period
// (many-to-one), however many runners complete parents at the same moment.
// A parent that fails or is cancelled releases nothing; retried to success
// later, it releases the child then. The child takes its parents' run and
// period, and can read them and their outputs with Job.Parents.
type Rule struct {
	// Name identifies the rule; it is part of each child's idempotency key,
	// so keep it stable across releases.
	Name string
	// Parents are the kinds the child waits for.
	Parents []string
	// Each makes the rule one-to-one; it needs exactly one parent kind.
	Each bool
}

// rule is a registered rule, whose Child builds the child's job from its
// parents.
type rule = runner.Registered[childFunc]

type childFunc = func(parents []JobRecord) (Args, []EnqueueOption)

// Depend registers a rule whose child is a job of C's kind, built by child
// from the completed parents (in ID order); the options child returns are
// applied as Enqueue's. Every kind involved must be registered first. It
// returns an error wrapping ErrInvalidOption for a rule that is malformed,
// whose name is taken, that names an unknown kind, or that would close a
// cycle (a kind that waits, through rules, for itself).
func Depend[C Args](r *Registry, ru Rule, child func(parents []JobRecord) (C, []EnqueueOption)) error {
	if err := registry.CheckRule(ru.Name, len(ru.Parents), ru.Each, child == nil); err != nil {
		return err
	}
	childKind, err := kindOf[C]()
	if err != nil {
		return err
	}
	return r.r.AddRule(&rule{
		Dependency: runner.Dependency{Rule: runner.Rule{Name: ru.Name, Parents: slices.Clone(ru.Parents), Each: ru.Each}, ChildKind: childKind},
		Child: func(parents []JobRecord) (Args, []EnqueueOption) {
			c, opts := child(parents)
			return c, opts
		},
	}, reflect.TypeFor[C]())
}

// Rules returns the registered dependency rules, sorted by name.
func (r *Registry) Rules() []Rule {
	return converted(r.r.RulesFor(""), func(ru *rule) Rule {
		return Rule{Name: ru.Name, Parents: slices.Clone(ru.Parents), Each: ru.Each}
	})
}

// rulesFor returns the rules in which kind is a parent, or every rule for
// "", by name.
func (r *Registry) rulesFor(kind string) []*rule { return r.r.RulesFor(kind) }

// rulesOf is what package operate reads of rules.
func rulesOf(rules []*rule) []runner.Dependency {
	return converted(rules, func(ru *rule) runner.Dependency { return ru.Dependency })
}

// releaser builds the children of the registry's rules for a runner, with
// Enqueue's checks, and with the Release hooks of hooks if there are any.
func (c *Client) releaser(log *slog.Logger, hooks []Hooks) runner.Rules {
	rel := release.Children[JobRecord]{Store: c.st, Log: log,
		Rules: func(kind string) []runner.Rule {
			return converted(c.reg.rulesFor(kind), func(ru *rule) runner.Rule { return ru.Rule })
		},
		Build: func(r runner.Release, parents []JobRecord) (newJob, error) {
			ru := c.reg.r.Rule(r.Rule)
			rows, err := c.prepareStamped(func() []Params {
				args, opts := ru.Child(parents)
				return []Params{{Args: args, Options: opts}}
			}, func(int) string { return r.Key }, r.RunID.String, r.Period.String)
			if err != nil {
				return newJob{}, err
			}
			return rows[0], nil
		}}
	if slices.ContainsFunc(hooks, func(h Hooks) bool { return h.Release != nil }) {
		rel.Metadata = func(ctx context.Context, completed *runner.Row, parents []JobRecord) (metas []map[string]string) {
			rec := recordOf(completed)
			for _, h := range hooks {
				if h.Release != nil {
					metas = append(metas, h.Release(ctx, &rec, parents))
				}
			}
			return metas
		}
	}
	return rel
}
