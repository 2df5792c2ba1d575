// Package release builds the child jobs that package queue's dependency
// rules release, for a runner, which completes the last parent and inserts
// the child in one transaction (it is the runner's runner.Rules). It works
// on queue's job record type R, which it cannot import, and leaves what
// runs the user's code (the rule's function, the child's checks) to queue.
package release

import (
	"context"
	"log/slog"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/enqueue"
	"github.com/sheaf-dev/sheaf/queue/internal/runner"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Children is a runner's runner.Rules.
type Children[R any] struct {
	Store store.Store
	Log   *slog.Logger
	// Rules returns the rules in which jobs of kind are parents, by name.
	Rules func(kind string) []runner.Rule
	// Build builds the child of release r from its parents, as Enqueue
	// checks a job, with r's idempotency key, run and period.
	Build func(r runner.Release, parents []R) (store.NewJob, error)
	// Metadata, if set, returns what hooks make of the parents, to store
	// with the child over its own metadata; ctx is the attempt's, and
	// completed the last parent's row.
	Metadata func(ctx context.Context, completed *runner.Row, parents []R) []map[string]string
}

// For returns the rules in which jobs of kind are parents, by name.
func (c Children[R]) For(kind string) []runner.Rule { return c.Rules(kind) }

// Child builds the child of release r from its complete parents, read in
// tx; attempt completed the last of them. A child that cannot be built is
// logged and nil: the parent's work is done, so it completes without the
// child rather than fail the same way again, and the review lists the
// chain as stopped.
func (c Children[R]) Child(tx *gorm.DB, attempt *runner.Execution, r runner.Release) (*store.NewJob, error) {
	var parents []R
	if err := c.Store.Jobs(tx.Statement.Context, tx, store.Filter{IDs: r.Parents}, 0, &parents); err != nil {
		return nil, err
	}
	child, err := c.Build(r, parents)
	if err != nil {
		c.Log.Error("queue: dependency rule failed to build its child; the parent completes without it",
			runner.ErrAttrs(err, "rule", r.Rule, "group", r.Group)...)
		return nil, nil
	}
	if c.Metadata != nil {
		ctx := attempt.Hooked()
		if ctx == nil {
			ctx = context.Background()
		}
		overlay(&child, c.Metadata(ctx, attempt.Row(), parents))
	}
	return &child, nil
}

// overlay stores metas, in order, over child's own metadata.
func overlay(child *store.NewJob, metas []map[string]string) {
	var meta map[string]string
	for _, m := range metas {
		if len(m) == 0 {
			continue
		}
		if meta == nil && child.Metadata != nil {
			meta, _ = store.DecodeMetadata(child.Metadata) // encoded by this process
		}
		meta = enqueue.Merged(meta, m)
	}
	if meta != nil {
		child.Metadata = store.EncodeMetadata(meta)
	}
}
