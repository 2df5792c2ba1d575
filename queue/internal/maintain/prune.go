package maintain

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Defaults of the pruning task.
const (
	// PruneBatch is how many finished jobs one transaction examines, and
	// deletes at most: small enough that its locks are held for
	// milliseconds, and runners' statements wait no longer.
	PruneBatch = 1000
	// PrunePause is the least delay between two batches of one pass.
	PrunePause = 50 * time.Millisecond
	// PruneYield is how many times a batch's own time the pause after it
	// lasts at least: however slow the server, the pruner keeps it busy
	// at most a quarter of the time, and the runners beside it the rest.
	PruneYield = 3
	// PruneEvery is the delay between passes, once a pass has reached the
	// last job due.
	PruneEvery = 10 * time.Minute
	// PeriodRecheck is how long a pass trusts that a period it read whole
	// had every job due, before it reads the period again: a night's
	// period is a hundred batches, each of which would read it all. A job
	// added to the period or retried meanwhile finds it partly deleted
	// either way, as it would after any batch of the period.
	PeriodRecheck = time.Minute
	// maxHeld bounds the runs, and the periods, that a pass passes over
	// for being held: past it, their jobs are read and found held again.
	maxHeld = 1000
)

// Keep says how long finished jobs of a status (and of a kind, if Kind is
// set) are kept; Forever keeps them.
type Keep struct {
	Kind, Status string
	For          time.Duration
	Forever      bool
}

// Prune is the Task that deletes finished jobs their retention no longer
// keeps, one batch per Run, walking them oldest first: a Run returns a
// pause (PrunePause, or PruneYield times the batch's time if longer) while
// the pass has more to walk, PruneEvery once it is over.
// It deletes only jobs that finished before the first day and the first
// hour whose roll-ups are not final, so history is rolled up before its
// rows go; before the first roll-ups it deletes nothing.
type Prune struct {
	Store store.Store
	// Rules returns the rules, read again every Run (kinds may be
	// registered later): kinds' rules first, then each status's with Kind
	// "". A status without a rule is kept.
	Rules func() []Keep
	// Archive, if set, receives each batch's job IDs in the transaction
	// that deletes them; an error deletes nothing.
	Archive func(tx *gorm.DB, ids []int64) error
	// Batch, Pause and Every: 0 means PruneBatch, PrunePause, PruneEvery.
	Batch        int
	Pause, Every time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time

	// pass is where the pass under way is: the leader runs one Run at a
	// time, and a new leader starts a pass from the oldest job.
	pass prunePass
	// deleted counts the jobs deleted.
	deleted int64
}

// prunePass is what a pass of Prune has learnt so far; its zero value is
// a pass not begun.
type prunePass struct {
	// after is where the pass goes on.
	after store.Place
	// kinds are the kinds the pass walks, found by its first batch.
	kinds []string
	// rolled is how far the roll-ups went, both day and hour, when the
	// pass began.
	rolled time.Time
	// heldRuns and heldPeriods are the runs and periods the pass found
	// holding a job not due; duePeriods the periods it read whole and
	// found due, with when.
	heldRuns, heldPeriods []string
	duePeriods            map[string]time.Time
}

// rolledUp returns the time before which every day and every hour is
// rolled up, and false while nothing is.
func (p *Prune) rolledUp(ctx context.Context) (time.Time, bool, error) {
	fb, err := p.Store.FinalBefore(ctx)
	if err != nil || fb == "" {
		return time.Time{}, false, wrap("prune: rolled-up days", err)
	}
	rolled, err := time.Parse(store.DayLayout, fb)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("prune: rolled-up days: %w", err)
	}
	_, hours, ok, err := p.Store.HoursFinal(ctx)
	if err != nil || !ok {
		return time.Time{}, false, wrap("prune: rolled-up hours", err)
	}
	if hours.Before(rolled) {
		rolled = hours
	}
	return rolled, true, nil
}

// Deleted returns how many jobs p's Runs have deleted. Call it between
// Runs.
func (p *Prune) Deleted() int64 { return p.deleted }

// Name implements Task.
func (*Prune) Name() string { return "prune" }

// Run implements Task.
func (p *Prune) Run(ctx context.Context) (time.Duration, error) {
	every := cmp.Or(p.Every, PruneEvery)
	if !p.inPass() {
		// A pass reads how far the roll-ups go once, at its start: they
		// only move forward, so the value read stays safe for the whole
		// pass, and its batches pay for no reads of their own.
		rolled, ok, err := p.rolledUp(ctx)
		if err != nil || !ok {
			return every, err
		}
		p.pass.rolled = rolled
	}
	rolled := p.pass.rolled
	now := clock(p.Now)
	var rules []store.KeepRule
	for _, k := range p.Rules() {
		before := now.Add(-k.For)
		if rolled.Before(before) {
			before = rolled
		}
		rules = append(rules, store.KeepRule{Kind: k.Kind, Status: k.Status, Before: before, Forever: k.Forever})
	}
	began := time.Now()
	res, err := p.Store.Prune(ctx, p.pass.batch(rules, cmp.Or(p.Batch, PruneBatch), p.Archive, now))
	if err != nil {
		return every, fmt.Errorf("prune: %w", err)
	}
	p.deleted += int64(len(res.Deleted))
	if res.Done {
		p.pass = prunePass{}
		return every, nil
	}
	p.pass.learn(res, now)
	return max(cmp.Or(p.Pause, PrunePause), PruneYield*time.Since(began)), nil
}

// batch is the pass's next batch under rules, at now: it trusts the
// periods found due less than PeriodRecheck before now, and forgets the
// others.
func (ps *prunePass) batch(rules []store.KeepRule, limit int, archive func(*gorm.DB, []int64) error, now time.Time) store.Prune {
	var due []string
	for d, at := range ps.duePeriods {
		if now.Sub(at) < PeriodRecheck {
			due = append(due, d)
		} else {
			delete(ps.duePeriods, d)
		}
	}
	slices.Sort(due)
	return store.Prune{Rules: rules, After: ps.after, Limit: limit, Archive: archive, Kinds: ps.kinds,
		HeldRuns: ps.heldRuns, HeldPeriods: ps.heldPeriods, DuePeriods: due}
}

// learn records what a batch at now found, for the batches after it: where
// to go on, and which runs and periods are held (up to maxHeld of each)
// or due.
func (ps *prunePass) learn(res store.PruneResult, now time.Time) {
	ps.after, ps.kinds = res.Next, res.Kinds
	held := func(known, found []string) []string {
		return append(known, found[:min(len(found), max(maxHeld-len(known), 0))]...)
	}
	ps.heldRuns, ps.heldPeriods = held(ps.heldRuns, res.HeldRuns), held(ps.heldPeriods, res.HeldPeriods)
	if ps.duePeriods == nil && len(res.DuePeriods) > 0 {
		ps.duePeriods = map[string]time.Time{}
	}
	for _, d := range res.DuePeriods {
		ps.duePeriods[d] = now
	}
}

// inPass reports whether p's pass has more to walk.
func (p *Prune) inPass() bool { return p.pass.after != (store.Place{}) }

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// RunNow runs each of tasks, in order, until its round is over (see
// roundGoesOn), pausing between its batches as the leader would, and
// returns how many jobs the Prune among them deleted: a leader's upkeep,
// done at once by a program that runs no runner. It stops at the first
// error, or when ctx ends.
func RunNow(ctx context.Context, tasks []Task) (int64, error) {
	pruned := func() int64 {
		for _, t := range tasks {
			if p, ok := t.(*Prune); ok {
				return p.Deleted()
			}
		}
		return 0
	}
	for _, t := range tasks {
		for {
			next, err := t.Run(ctx)
			if err != nil {
				return pruned(), err
			}
			if !roundGoesOn(t, next) {
				break
			}
			if err := pause(ctx, next); err != nil {
				return pruned(), err
			}
		}
	}
	return pruned(), nil
}

// roundGoesOn reports whether t's round has more to do after a Run that
// asked for a pause of next: a Prune while its pass has, another task
// while it asks for no pause or PrunePause.
func roundGoesOn(t Task, next time.Duration) bool {
	if p, ok := t.(*Prune); ok {
		return p.inPass()
	}
	return next == 0 || next == PrunePause
}

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
