package runner

// Releasing: completing a job that is a parent in dependency rules, and
// inserting the children its completion makes due, in one transaction.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// Rule is a dependency rule as the runner applies it (see queue.Rule).
type Rule struct {
	Name    string
	Parents []string // the kinds the child waits for
	Each    bool     // one child per parent, rather than one per period
}

// Release is what a rule's child is built from: its complete parents, and
// what the child takes of them.
type Release struct {
	Rule    string
	Group   string  // "job:ID" (one-to-one) or "period:P" (many-to-one)
	Key     string  // the child's idempotency key
	Parents []int64 // in ID order
	RunID   sql.NullString
	Period  sql.NullString
}

// completeReleasing completes one successful attempt of a job that is a
// parent in rules, and releases the children whose parents are now all
// complete, in one transaction. It reports whether the completion was
// accepted (the attempt was still the job's) and the children it released.
func (r *Runner) completeReleasing(ctx context.Context, ex *Execution, rules []Rule) (accepted bool, released []Released, err error) {
	err = r.st.Tx(ctx, r.cfg.DB, func(tx *gorm.DB) error {
		accepted, released, err = r.completeIn(tx, ex, rules)
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
// handler's (CompleteTx). The children are released only if tx commits,
// and then for certain, whatever happens to the process after the commit.
func (r *Runner) completeIn(tx *gorm.DB, attempt *Execution, rules []Rule) (accepted bool, released []Released, err error) {
	period, runID, completed, err := r.st.CompleteTx(tx, attempt.row.ID, attempt.row.Claims)
	if err != nil || !completed {
		return false, nil, err
	}
	for _, ru := range rules {
		child, err := r.release(tx, ru, attempt, period, runID)
		if err != nil {
			return false, nil, fmt.Errorf("rule %q: %w", ru.Name, err)
		}
		if child != nil {
			released = append(released, *child)
		}
	}
	return true, released, nil
}

// EachGroup names the group of a one-to-one rule's parent, and PeriodGroup
// that of a many-to-one rule's parents in a period. ChildKey is the
// idempotency key of a group's child, under which it is released once;
// package queue finds children and stopped chains by it.
func EachGroup(parentID int64) string { return fmt.Sprint(eachGroup, parentID) }

// eachGroup begins the name of every one-to-one group.
const eachGroup = "job:"

// EachKeyPrefix is what the child keys of a one-to-one rule's parents
// begin with: the parent's ID follows.
func EachKeyPrefix(rule string) string { return ChildKey(rule, eachGroup) }

// PeriodGroup names the group of a many-to-one rule's parents in period
// (see EachGroup).
func PeriodGroup(period string) string { return "period:" + period }

// ChildKey is the idempotency key of the child of a rule's group (see
// EachGroup).
func ChildKey(rule, group string) string { return "sheaf-dep:" + rule + ":" + group }

// release creates a rule's child if its parents are now all complete.
func (r *Runner) release(tx *gorm.DB, ru Rule, attempt *Execution, period, runID sql.NullString) (*Released, error) {
	parentID := attempt.row.ID
	group := EachGroup(parentID)
	if !ru.Each {
		if !period.Valid {
			return nil, nil // many-to-one rules group by period
		}
		group = PeriodGroup(period.String)
	}
	key := ChildKey(ru.Name, group)
	// Parents that complete at the same time on different runners meet
	// here: each has already written its own completion, and each reads the
	// others' after the lock, so the last one to arrive sees them all.
	if err := r.st.LockGroup(tx, key); err != nil {
		return nil, err
	}
	var ids []int64
	if ru.Each {
		ids = []int64{parentID}
	} else {
		found, err := r.st.PeriodParents(tx, period.String, ru.Parents)
		if err != nil {
			return nil, err
		}
		kinds := map[string]bool{}
		complete := true
		for _, p := range found {
			complete = complete && p.Status == statusCompleted
			kinds[p.Kind] = true
			ids = append(ids, p.ID)
		}
		if !complete || len(kinds) < len(ru.Parents) {
			return nil, nil // not yet: the last parent to complete releases the child
		}
		// Parents of one period may come from several runs (the weekly and
		// the monthly schedule); the child joins the first parent's, so
		// that which parent happened to finish last does not decide it.
		runID = sql.NullString{}
		if found[0].RunID != nil {
			runID = sql.NullString{String: *found[0].RunID, Valid: true}
		}
	}
	nj, err := r.cfg.Rules.Child(tx, attempt, Release{Rule: ru.Name, Group: group, Key: key, Parents: ids, RunID: runID, Period: period})
	if err != nil || nj == nil {
		return nil, err
	}
	c, err := r.st.InsertChild(tx, *nj, ids)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil // released already
	}
	if err != nil {
		return nil, err
	}
	return &Released{Rule: ru.Name, ID: c.ID, Kind: c.Kind, Queue: c.Queue, Priority: c.Priority, RunID: c.RunID, ParentIDs: ids}, nil
}
