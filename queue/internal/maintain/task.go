// Package maintain runs the queue's periodic upkeep (rescue of expired
// leases, pruning, roll-ups, alert evaluation) on one elected runner at a
// time, so that work meant to happen once happens once however many
// runners there are.
package maintain

import (
	"context"
	"time"
)

// Task is one piece of periodic upkeep. Only the elected leader runs tasks;
// it calls a task's Run one call at a time, and again after the delay Run
// returns. A Run cut short by a lost leadership or a stop sees its context
// cancelled, and must leave the database so that the next leader's Run
// carries on where it stopped.
type Task interface {
	// Name names the task in logs and telemetry.
	Name() string
	// Run does one round of the task and returns how long to wait before
	// the next. An error is logged, and the task runs again after the delay.
	Run(ctx context.Context) (next time.Duration, err error)
}
