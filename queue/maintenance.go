package queue

import (
	"context"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/maintain"
)

// MaintenanceTask is periodic upkeep that must run once across all runners
// however many there are, such as alert evaluation or a relay: the runners
// elect a leader among themselves, and only the leader runs the tasks
// given to it with WithMaintenance (see the package documentation's
// Maintenance).
//
// The leader calls Run one call at a time, first as it becomes leader, then
// again after the delay Run returns; a delay that is not positive, or a Run
// that panics, waits a minute. An error is logged at Error, and Run is
// called again after its delay. When the runner loses the leadership or
// stops, Run's context is cancelled: Run must then return promptly (within
// a third of the runner's lease, see WithLease) and leave the database so
// that the next leader's Run carries on where it stopped. A Run that
// returns in time never overlaps a Run of the same task on another runner.
type MaintenanceTask interface {
	// Name names the task in logs.
	Name() string
	// Run does one round of the task and returns how long to wait before
	// the next.
	Run(ctx context.Context) (next time.Duration, err error)
}

// WithMaintenance adds tasks to those the runner runs while it leads the
// maintenance, after the queue's own (the rescue of expired leases, every
// WithRescueInterval, and the upkeep the client's options ask for). Every
// runner that may lead should be given the same tasks: the one that leads
// runs its own. A nil task is an error (ErrInvalidOption).
func WithMaintenance(tasks ...MaintenanceTask) RunnerOption {
	return runnerOption(func(c *config) error {
		return c.AddTasks(converted(tasks, func(t MaintenanceTask) maintain.Task { return t }))
	})
}

// WithoutMaintenance makes a runner that never campaigns for the
// maintenance's leadership, and so never rescues expired leases nor runs
// maintenance tasks: for runners in a process that must not take on that
// work, such as a web server's. Some runner on the database must campaign,
// or jobs whose runner died stay PROCESSING. It cannot be combined with
// WithMaintenance (ErrInvalidOption).
func WithoutMaintenance() RunnerOption {
	return runnerOption(func(c *config) error { c.NoCampaign = true; return nil })
}
