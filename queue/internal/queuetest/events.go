package queuetest

import (
	"sync"
	"testing"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// Events records what an observer sees and lets a test wait for an event.
// It keeps counts, so waiting costs the same however many events came.
type Events struct {
	mu     sync.Mutex
	all    []queue.Event
	counts map[eventKey]int
	cond   *sync.Cond
}

type eventKey struct {
	typ queue.EventType
	id  int64 // 0: any job
}

// NewEvents returns an empty record, to install with queue.WithObserver.
func NewEvents() *Events {
	e := &Events{counts: map[eventKey]int{}}
	e.cond = sync.NewCond(&e.mu)
	return e
}

// Observe records ev.
func (e *Events) Observe(ev queue.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
	e.counts[eventKey{ev.Type, 0}]++
	if ev.JobID != 0 {
		e.counts[eventKey{ev.Type, ev.JobID}]++
	}
	e.cond.Broadcast()
}

// Wait blocks until n events of type typ for job id (0: any job) have been
// observed, and returns them. It gives up after a generous deadline, which
// only a broken runner reaches.
func (e *Events) Wait(t testing.TB, typ queue.EventType, id int64, n int) []queue.Event {
	t.Helper()
	const limit = 90 * time.Second
	timedOut := false
	deadline := time.AfterFunc(limit, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		timedOut = true
		e.cond.Broadcast()
	})
	defer deadline.Stop()
	e.mu.Lock()
	defer e.mu.Unlock()
	for e.counts[eventKey{typ, id}] < n {
		if timedOut {
			t.Fatalf("timed out waiting for events: want %d %v events for job %d, have %d", n, typ, id, e.counts[eventKey{typ, id}])
		}
		e.cond.Wait()
	}
	var out []queue.Event
	for _, ev := range e.all {
		if ev.Type == typ && (id == 0 || ev.JobID == id) {
			out = append(out, ev)
		}
	}
	return out
}

// Of returns the types of the events of job id, in the order observed.
func (e *Events) Of(id int64) []queue.EventType {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []queue.EventType
	for _, ev := range e.all {
		if ev.JobID == id {
			out = append(out, ev.Type)
		}
	}
	return out
}
