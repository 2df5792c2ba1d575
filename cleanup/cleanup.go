// Package cleanup defines how sheaf undoes the partial output of a batch that
// did not finish, and ships the strategies that need no database.
//
// A batch is persisted one sub-batch per transaction, so when sub-batch N fails
// sub-batches 1..N-1 are already committed. The engine then calls
// [Strategy.Cleanup], which must remove everything written for the batch ID, so
// that a batch is all-or-nothing. When every sub-batch succeeded it calls
// [Strategy.MarkComplete] instead.
//
// Strategies that talk to a database live next to the database code (see
// package github.com/sheaf-dev/sheaf/batch/gormbatch), so that importing this
// package never pulls a driver into a build.
package cleanup

import (
	"context"
	"errors"

	"github.com/sheaf-dev/sheaf/worker"
)

// Sequence numbers passed to [Strategy.Cleanup] that do not name a sub-batch.
const (
	// SeqUnknown is passed when the failure was not a sub-batch returning an
	// error: a panic, or a hook that failed.
	SeqUnknown = -1
	// SeqIncomplete is passed when no sub-batch failed but the batch will
	// never finish: its end-of-batch message had not arrived when the engine
	// shut down, or a hard stop cut it short.
	SeqIncomplete = 0
)

// Strategy removes the partial writes of a failed batch and acknowledges the
// completed ones. The engine calls it from its worker goroutines, one call per
// batch ID at a time, so an implementation must be safe for concurrent use
// across batch IDs.
type Strategy interface {
	// Cleanup deletes everything persisted for batchID, whatever sub-batch
	// wrote it. failedSeq is the sequence number of the sub-batch that failed
	// (1-based), or SeqUnknown or SeqIncomplete. Cleanup must be idempotent:
	// the engine calls it at most once per failure, but a caller that retries
	// a batch, or a crash between the delete and its acknowledgement, may run
	// it again. Cleanup should honour ctx; the engine bounds it with a timeout.
	Cleanup(ctx context.Context, batchID string, failedSeq int) error
	// MarkComplete is called once after every sub-batch of batchID and the
	// after-batch hook succeeded. An error makes the batch fail (and be
	// cleaned up), so only return one when the batch must not count as done.
	MarkComplete(ctx context.Context, batchID string) error
}

// None returns a strategy that does nothing. It is the engine's default: with
// it, a failed batch leaves behind what its earlier sub-batches committed.
func None() Strategy { return none{} }

type none struct{}

func (none) Cleanup(context.Context, string, int) error { return nil }
func (none) MarkComplete(context.Context, string) error { return nil }

// Func adapts a function to a [Strategy] whose MarkComplete does nothing.
type Func func(ctx context.Context, batchID string, failedSeq int) error

// Cleanup calls f(ctx, batchID, failedSeq).
func (f Func) Cleanup(ctx context.Context, batchID string, failedSeq int) error {
	return f(ctx, batchID, failedSeq)
}

// MarkComplete does nothing and returns nil.
func (Func) MarkComplete(context.Context, string) error { return nil }

// Chain returns a strategy that calls each of strategies in order. Every
// strategy runs even when an earlier one fails, panics or calls
// runtime.Goexit, because a cleanup that stops half-way leaves more behind
// than one that tries everything; the errors, panics as
// [*worker.PanicError], are joined with [errors.Join]. Nil strategies are
// skipped.
func Chain(strategies ...Strategy) Strategy {
	kept := make(chain, 0, len(strategies))
	for _, s := range strategies {
		if s != nil {
			kept = append(kept, s)
		}
	}
	return kept
}

type chain []Strategy

func (c chain) Cleanup(ctx context.Context, batchID string, failedSeq int) error {
	return c.each(func(s Strategy) error { return s.Cleanup(ctx, batchID, failedSeq) })
}

func (c chain) MarkComplete(ctx context.Context, batchID string) error {
	return c.each(func(s Strategy) error { return s.MarkComplete(ctx, batchID) })
}

// each calls call for every strategy and joins the errors.
func (c chain) each(call func(Strategy) error) error {
	var errs []error
	for i, s := range c {
		worker.Try(func() error { return call(s) }, func(err error) {
			errs = append(errs, err)
			if errors.Is(err, worker.ErrGoexit) {
				// The goroutine is ending and the loop will not go on: the
				// strategies after s still get their turn. Their errors
				// cannot be returned; the caller hears of the Goexit.
				c[i+1:].each(call)
			}
		})
	}
	return errors.Join(errs...)
}
