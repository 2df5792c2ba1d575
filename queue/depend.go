package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
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

type rule struct {
	Rule
	childKind string
	// child builds the child's job from its parents.
	child func(parents []JobRecord) (Args, []EnqueueOption)
}

// Depend registers a rule whose child is a job of C's kind, built by child
// from the completed parents (in ID order); the options child returns are
// applied as Enqueue's. Every kind involved must be registered first. It
// returns an error wrapping ErrInvalidOption for a rule that is malformed,
// whose name is taken, that names an unknown kind, or that would close a
// cycle (a kind that waits, through rules, for itself).
func Depend[C Args](r *Registry, ru Rule, child func(parents []JobRecord) (C, []EnqueueOption)) error {
	if ru.Name == "" || len(ru.Name) > 200 {
		return invalid("rule name must have 1 to 200 bytes")
	}
	if err := checkText("rule name", ru.Name); err != nil {
		return err
	}
	if child == nil {
		return invalid("rule %q: nil child function", ru.Name)
	}
	if len(ru.Parents) == 0 || (ru.Each && len(ru.Parents) != 1) {
		return invalid("rule %q: needs parent kinds, exactly one for a one-to-one rule", ru.Name)
	}
	childKind, err := kindOf[C]()
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kinds[childKind] == nil || r.kinds[childKind].argsType != reflect.TypeFor[C]() {
		return invalid("rule %q: child kind %q is not registered with %v", ru.Name, childKind, reflect.TypeFor[C]())
	}
	for _, p := range ru.Parents {
		if r.kinds[p] == nil {
			return invalid("rule %q: parent kind %q is not registered", ru.Name, p)
		}
	}
	for _, existing := range r.rules {
		if existing.Name == ru.Name {
			return invalid("rule %q registered twice", ru.Name)
		}
	}
	if r.reachesLocked(childKind, ru.Parents) {
		return invalid("rule %q would make a cycle: %q already waits, through other rules, for %q", ru.Name, ru.Parents, childKind)
	}
	r.rules = append(r.rules, &rule{
		Rule:      Rule{Name: ru.Name, Parents: slices.Clone(ru.Parents), Each: ru.Each},
		childKind: childKind,
		child: func(parents []JobRecord) (Args, []EnqueueOption) {
			c, opts := child(parents)
			return c, opts
		},
	})
	return nil
}

// Rules returns the registered dependency rules, sorted by name.
func (r *Registry) Rules() []Rule {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Rule, len(r.rules))
	for i, ru := range r.rules {
		out[i] = Rule{Name: ru.Name, Parents: slices.Clone(ru.Parents), Each: ru.Each}
	}
	slices.SortFunc(out, func(a, b Rule) int { return cmpString(a.Name, b.Name) })
	return out
}

// reachesLocked reports whether any of targets is from, or is released,
// through rules, by a job of kind from.
func (r *Registry) reachesLocked(from string, targets []string) bool {
	seen := map[string]bool{}
	stack := []string{from}
	for len(stack) > 0 {
		k := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if slices.Contains(targets, k) {
			return true
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		for _, ru := range r.rules {
			if slices.Contains(ru.Parents, k) {
				stack = append(stack, ru.childKind)
			}
		}
	}
	return false
}

// rulesFor returns the rules in which kind is a parent, by name, so that
// their locks are always taken in the same order.
func (r *Registry) rulesFor(kind string) []*rule {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*rule
	for _, ru := range r.rules {
		if slices.Contains(ru.Parents, kind) {
			out = append(out, ru)
		}
	}
	slices.SortFunc(out, func(a, b *rule) int { return cmpString(a.Name, b.Name) })
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// hookRelease stores with child the metadata the Release hooks make of its
// parents, over the child's own; attempt completed the last of them.
func (rel releaser) hookRelease(child *newJob, attempt *execution, completed *JobRecord, parents []JobRecord) {
	ctx := attempt.hooked
	if ctx == nil {
		ctx = context.Background()
	}
	var meta map[string]string
	for _, h := range rel.hooks {
		if h.Release == nil {
			continue
		}
		if m := h.Release(ctx, completed, parents); len(m) > 0 {
			if meta == nil && child.Metadata != nil {
				meta, _ = store.DecodeMetadata(child.Metadata) // encoded by this process
			}
			meta = merged(meta, m)
		}
	}
	if meta != nil {
		child.Metadata = store.EncodeMetadata(meta)
	}
}

// releasedJob is a child job a rule released.
type releasedJob struct {
	rule string
	job  JobRecord
}

// releaser is the part of a runner that completes parents and releases
// their dependants, in one transaction (see Rule).
type releaser struct {
	c     *Client
	log   *slog.Logger
	hooks []Hooks
}

// completeReleasing completes one successful attempt of a job that is a
// parent in some rule, and releases the children whose parents are now all
// complete, in one transaction. It reports whether the completion was
// accepted (the attempt was still the job's) and the children it released.
func (rel releaser) completeReleasing(ctx context.Context, res result, rules []*rule) (accepted bool, released []releasedJob, err error) {
	err = rel.c.st.Tx(ctx, rel.c.db, func(tx *gorm.DB) error {
		accepted, released, err = rel.completeIn(tx, res.ex, rules)
		return err
	})
	if err != nil {
		return false, nil, err
	}
	return accepted, released, nil
}

// completeIn completes attempt's job inside tx, if the attempt still holds
// it, and releases the children of rules whose parents are now all
// complete, in tx too: the runner's transaction (completeReleasing) or the
// handler's (Job.CompleteTx). The children are released only if tx commits,
// and then for certain, whatever happens to the process after the commit.
func (rel releaser) completeIn(tx *gorm.DB, attempt *execution, rules []*rule) (accepted bool, released []releasedJob, err error) {
	period, runID, completed, err := rel.c.st.CompleteTx(tx, attempt.row.ID, attempt.row.Claims)
	if err != nil || !completed {
		return false, nil, err
	}
	for _, ru := range rules {
		child, err := rel.release(tx, ru, attempt, period, runID)
		if err != nil {
			return false, nil, fmt.Errorf("rule %q: %w", ru.Name, err)
		}
		if child != nil {
			released = append(released, releasedJob{rule: ru.Name, job: *child})
		}
	}
	return true, released, nil
}

// release creates a rule's child if its parents are now all complete.
func (rel releaser) release(tx *gorm.DB, ru *rule, attempt *execution, period, runID sql.NullString) (*JobRecord, error) {
	completed := &attempt.row
	parentID := completed.ID
	group := fmt.Sprint("job:", parentID)
	if !ru.Each {
		if !period.Valid {
			return nil, nil // many-to-one rules group by period
		}
		group = "period:" + period.String
	}
	key := "sheaf-dep:" + ru.Name + ":" + group
	// Parents that complete at the same time on different runners meet
	// here: each has already written its own completion, and each reads the
	// others' after the lock, so the last one to arrive sees them all.
	if err := rel.c.st.LockGroup(tx, key); err != nil {
		return nil, err
	}
	var parents []JobRecord
	if ru.Each {
		parents = []JobRecord{{ID: parentID}}
	} else {
		found, err := rel.c.st.PeriodParents(tx, period.String, ru.Parents)
		if err != nil {
			return nil, err
		}
		kinds := map[string]bool{}
		complete := true
		for _, p := range found {
			complete = complete && Status(p.Status) == StatusCompleted
			kinds[p.Kind] = true
			parents = append(parents, JobRecord{ID: p.ID, Kind: p.Kind, Status: Status(p.Status), RunID: p.RunID})
		}
		if !complete || len(kinds) < len(ru.Parents) {
			return nil, nil // not yet: the last parent to complete releases the child
		}
		// Parents of one period may come from several runs (the weekly and
		// the monthly schedule); the child joins the first parent's, so
		// that which parent happened to finish last does not decide it.
		runID = sql.NullString{}
		if parents[0].RunID != nil {
			runID = sql.NullString{String: *parents[0].RunID, Valid: true}
		}
	}
	ids := make([]int64, len(parents))
	for i, p := range parents {
		ids[i] = p.ID
	}
	var full []JobRecord
	err := rel.c.st.Jobs(tx.Statement.Context, tx, store.Filter{IDs: ids}, 0, &full)
	if err != nil {
		return nil, err
	}
	// The rule's function, and the child's Kind and MarshalJSON, are the
	// user's code, and the child is checked as Enqueue checks a job.
	var nj newJob
	err = userCall(func() error {
		args, opts := ru.child(full)
		opts = append(opts, IdempotencyKey(key))
		if runID.Valid {
			opts = append(opts, InRun(runID.String))
		}
		if period.Valid {
			opts = append(opts, InPeriod(period.String))
		}
		rows, err := rel.c.prepareAll([]Params{{Args: args, Options: opts}})
		if err == nil {
			nj = rows[0]
		}
		return err
	})
	if err == nil && len(rel.hooks) > 0 {
		rel.hookRelease(&nj, attempt, completed, full)
	}
	if err != nil {
		// The child cannot be built: a panic, or a job Enqueue refuses.
		// The parent's work is done, so it completes; running it again
		// would fail the same way. The child is not released: the log
		// says why, and the review lists the chain as stopped with every
		// parent complete.
		rel.log.Error("queue: dependency rule failed to build its child; the parent completes without it",
			errAttrs(err, "rule", ru.Name, "group", group)...)
		return nil, nil
	}
	c, err := rel.c.st.InsertChild(tx, nj, ids)
	child := JobRecord{ID: c.ID, Kind: c.Kind, Queue: c.Queue, Priority: c.Priority, RunID: c.RunID}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil // released already
	}
	if err != nil {
		return nil, err
	}
	child.ParentIDs = ids
	return &child, nil
}
