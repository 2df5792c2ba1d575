// Package attach lets package queue/queuetest give a queue.Job built in
// memory an execution of its own, so a handler's unit test observes what
// the handler does through the job, without package queue exporting a way
// to do so to its other users.
package attach

import (
	"context"

	"gorm.io/gorm"
)

// Execution is what a queue.Job calls for the attempt that runs it.
type Execution interface {
	SetProgress(ctx context.Context, processed, total int64) error
	SetOutput(ctx context.Context, output string) error
	// Jobs loads the jobs with ids into dest, a *[]queue.JobRecord.
	Jobs(ctx context.Context, ids []int64, dest any) error
	CompleteTx(ctx context.Context, tx *gorm.DB) error
}

// Job gives job, a *queue.Job[A] of any A, the execution ex, and reports
// whether job was one. Package queue sets it as it is initialised.
var Job func(job any, ex Execution) bool
