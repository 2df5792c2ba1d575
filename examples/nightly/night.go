package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// night follows the queue through its observer: it prints what happens,
// stamped with the simulated time, and keeps what the program waits on, so
// that every wait is for an event and none is a sleep.
type night struct {
	clock *fastClock

	mu      sync.Mutex
	jobs    map[int64]*seen
	runs    []queue.Event // EventScheduled, in order
	changed chan struct{} // closed and replaced at every change
}

// seen is a job as the events and its handler told of it.
type seen struct {
	kind, subject string
	status        queue.Status
	started       time.Time // simulated, when its handler last began
	detail        string    // what its handler said of its work
}

func newNight(clock *fastClock) *night {
	return &night{clock: clock, jobs: map[int64]*seen{}, changed: make(chan struct{})}
}

// say prints a line, stamped with the simulated time.
func (n *night) say(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	n.mu.Lock()
	defer n.mu.Unlock()
	fmt.Printf("%s  %s\n", n.clock.Now().Format("Mon 15:04:05"), line)
}

func (n *night) jobLocked(id int64, kind string) *seen {
	j := n.jobs[id]
	if j == nil {
		j = &seen{kind: kind, status: queue.StatusQueued}
		n.jobs[id] = j
	}
	return j
}

func (n *night) changedLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
}

// submitted records a job the program enqueued itself.
func (n *night) submitted(rec *queue.JobRecord) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.jobLocked(rec.ID, rec.Kind).subject = subject(*rec)
	n.changedLocked()
}

// handle wraps a report's work into a handler that tells the night when it
// begins and what it did.
func handle[A subjectArgs](n *night, work func(context.Context, *queue.Job[A]) (string, error)) queue.Handler[A] {
	return queue.HandlerFunc[A](func(ctx context.Context, job *queue.Job[A]) error {
		n.mu.Lock()
		j := n.jobLocked(job.ID, job.Kind)
		j.subject, j.started = job.Args.Subject(), n.clock.Now()
		n.mu.Unlock()
		detail, err := work(ctx, job)
		n.mu.Lock()
		j.detail = detail
		n.mu.Unlock()
		return err
	})
}

// Observe implements queue.Observer. It runs on the runner's goroutines, so
// it only notes and prints.
func (n *night) Observe(ev queue.Event) {
	n.mu.Lock()
	defer n.mu.Unlock()
	defer n.changedLocked()
	stamp := n.clock.Now().Format("Mon 15:04:05")
	say := func(format string, args ...any) { fmt.Printf("%s  %s\n", stamp, fmt.Sprintf(format, args...)) }
	if ev.Type == queue.EventScheduled {
		n.runs = append(n.runs, ev)
		say("schedule %-8s fired: %s in run %s", ev.Schedule, plural(ev.Jobs, "job"), ev.RunID)
		return
	}
	j := n.jobLocked(ev.JobID, ev.Kind)
	name := fmt.Sprintf("job %2d %-19s %-18s", ev.JobID, ev.Kind, j.subject)
	switch ev.Type {
	case queue.EventStarted:
		j.status = queue.StatusProcessing
	case queue.EventCompleted:
		j.status = queue.StatusCompleted
		say("%s completed in %v: %s", name, ev.Duration.Round(time.Millisecond), j.detail)
	case queue.EventRetrying:
		j.status = queue.StatusQueued
		say("%s attempt %d of %d failed, retry in %v: %v", name, ev.Attempt, ev.MaxAttempts, ev.RetryIn, ev.Err)
	case queue.EventFailed:
		j.status = queue.StatusFailed
		say("%s FAILED on attempt %d of %d: %v", name, ev.Attempt, ev.MaxAttempts, ev.Err)
	case queue.EventReleased:
		var parents []string
		for _, id := range ev.ParentIDs {
			if p := n.jobs[id]; p != nil {
				parents = append(parents, fmt.Sprintf("%d %s %s", id, p.kind, p.subject))
			} else {
				parents = append(parents, fmt.Sprint(id))
			}
		}
		say("job %2d %-19s released by rule %s, its parents done: %s", ev.JobID, ev.Kind, ev.Rule, strings.Join(parents, ", "))
	default:
		if ev.Type == queue.EventCancelled {
			j.status = queue.StatusCancelled
		}
		say("%s %v", name, ev.Type)
	}
}

// started returns when job id's handler last began, on the simulated clock.
func (n *night) started(id int64) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	if j := n.jobs[id]; j != nil {
		return j.started
	}
	return time.Time{}
}

// scheduled returns the runs the schedules have started, in order.
func (n *night) scheduled() []queue.Event {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.runs)
}

// busy lists the jobs the events have not yet shown finished.
func (n *night) busy() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for id, j := range n.jobs {
		if !j.status.Terminal() {
			out = append(out, fmt.Sprintf("job %d %s %s %s", id, j.kind, j.subject, j.status))
		}
	}
	slices.Sort(out)
	return out
}

// settle waits until the schedules have started runs runs in all and every
// job of them has finished (COMPLETED, FAILED or CANCELLED): the events say
// so first, then the database confirms it, which also covers a job whose
// first event is still on its way. It returns the jobs of the runs.
func (n *night) settle(ctx context.Context, client *queue.Client, what string, runs int) ([]queue.JobRecord, error) {
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		n.mu.Lock()
		changed := n.changed
		n.mu.Unlock()
		if started := n.scheduled(); len(started) >= runs && len(n.busy()) == 0 {
			recs, err := jobsOf(ctx, client, started)
			if err != nil {
				return nil, err
			}
			if !slices.ContainsFunc(recs, func(r queue.JobRecord) bool { return !r.Status.Terminal() }) {
				return recs, nil
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-deadline.C:
			return nil, fmt.Errorf("%s: not finished after a minute: %d of %d runs started; still going: %s",
				what, len(n.scheduled()), runs, strings.Join(n.busy(), "; "))
		}
	}
}

// jobsOf lists the jobs of runs, by ID.
func jobsOf(ctx context.Context, client *queue.Client, runs []queue.Event) ([]queue.JobRecord, error) {
	var all []queue.JobRecord
	for _, r := range runs {
		recs, err := client.List(ctx, queue.Filter{RunID: r.RunID, Limit: 1000})
		if err != nil {
			return nil, err
		}
		all = append(all, recs...)
	}
	slices.SortFunc(all, func(a, b queue.JobRecord) int { return int(a.ID - b.ID) })
	return all, nil
}
