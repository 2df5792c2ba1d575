// Package worker runs tasks on a fixed set of goroutines with one ordering
// rule: tasks that share a key run one at a time, in the order they were
// submitted, while tasks with different keys run in parallel. sheaf keys tasks
// by batch ID, which gives each batch ID strictly ordered sub-batches and never
// two workers at once.
//
// # Back-pressure
//
// [Pool.Submit] never blocks, so that a caller can submit while holding its
// own lock and keep its submissions in order. Instead the pool has a soft
// limit on the tasks it holds (queued or running): callers check [Pool.Full]
// and wait on [Pool.Room] before producing more work. Callers that submit
// after their own check may overshoot the limit by one task each.
package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// ErrClosed is returned by [Pool.Submit] after [Pool.Close].
var ErrClosed = errors.New("worker: pool closed")

// Task is a unit of work. ctx is the context given to [Pool.Start].
type Task func(ctx context.Context)

// PanicError carries a recovered panic, or a call to runtime.Goexit (see
// [ErrGoexit]), and the stack of the goroutine it happened on.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	if e.Value == ErrGoexit {
		return ErrGoexit.Error()
	}
	return fmt.Sprintf("panic: %v", e.Value)
}

// Unwrap returns the panic value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// ErrGoexit is the Value of the *PanicError that stands for a call to
// runtime.Goexit (which testing's FailNow and Skip make), so that code which
// handles panics handles it too.
var ErrGoexit = errors.New("worker: runtime.Goexit called")

// Safely calls fn and turns a panic in it into a *PanicError. Like recover,
// it cannot stop runtime.Goexit: if fn calls it, Safely does not return. Use
// [Try] where something must follow fn whatever it does.
func Safely(fn func() error) (err error) {
	Try(fn, func(e error) { err = e })
	return err
}

// Try calls fn and reports whether it returned nil. If fn returns an error or
// panics, Try calls failed with the error (a panic as a *PanicError) and
// returns false.
//
// If fn calls runtime.Goexit, nothing can keep its goroutine alive, and Try
// never returns: it calls failed with a *PanicError whose Value is
// [ErrGoexit], from a deferred call while the goroutine unwinds. So failed,
// not the code after Try, is where the work that must follow a failure goes,
// all of it; it then happens whichever way fn failed. failed may itself call
// Try, so that a failure while handling a Goexit is handled in turn.
func Try(fn func() error, failed func(error)) bool {
	returned := false
	defer func() {
		if returned {
			return
		}
		if r := recover(); r != nil {
			failed(&PanicError{Value: r, Stack: debug.Stack()})
			return
		}
		failed(&PanicError{Value: ErrGoexit, Stack: debug.Stack()})
	}()
	err := fn()
	returned = true
	if err != nil {
		failed(err)
		return false
	}
	return true
}

// closedChan is returned by Room when there is room already.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Pool is a keyed worker pool. Create one with [New].
type Pool struct {
	workers int
	limit   int64
	onPanic func(key string, err *PanicError)

	// held counts tasks submitted and not finished. It changes under mu but
	// is read without it by Full, on every send of the caller's hot path.
	held atomic.Int64

	mu          sync.Mutex
	work        sync.Cond // signalled when ready gains a strand or the pool drains
	ready       []*strand // keys with tasks and no worker, oldest first
	strands     map[string]*strand
	roomWaiting bool
	room        chan struct{} // closed when held drops below limit
	started     bool
	closing     bool
	alive       int
	done        chan struct{}
}

// strand is the FIFO of tasks of one key.
type strand struct {
	key   string
	tasks []Task
	head  int
}

func (s *strand) pop() (Task, bool) {
	if s.head == len(s.tasks) {
		return nil, false
	}
	t := s.tasks[s.head]
	s.tasks[s.head] = nil
	s.head++
	switch {
	case s.head == len(s.tasks):
		s.tasks, s.head = s.tasks[:0], 0
	case s.head >= 32 && 2*s.head >= len(s.tasks):
		// A key that never drains would otherwise grow its slice forever.
		n := copy(s.tasks, s.tasks[s.head:])
		clear(s.tasks[n:])
		s.tasks, s.head = s.tasks[:n], 0
	}
	return t, true
}

func (s *strand) empty() bool { return s.head == len(s.tasks) }

// New returns a pool of workers goroutines whose soft limit is limit held
// tasks. onPanic receives a task's panic, which the pool recovers, or its
// call to runtime.Goexit (a *PanicError wrapping [ErrGoexit]); either way a
// new goroutine takes the worker's place, so the pool keeps its size and the
// key's later tasks still run, in order. onPanic must not be nil, and must
// not panic. New panics if workers < 1, limit < 1 or onPanic is nil. It
// starts no goroutines.
func New(workers, limit int, onPanic func(key string, err *PanicError)) *Pool {
	if workers < 1 || limit < 1 || onPanic == nil {
		panic(fmt.Sprintf("worker: New(%d, %d, onPanic nil=%t)", workers, limit, onPanic == nil))
	}
	p := &Pool{
		workers: workers,
		limit:   int64(limit),
		onPanic: onPanic,
		strands: make(map[string]*strand),
		room:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	p.work.L = &p.mu
	return p
}

// Start starts the workers. Tasks receive ctx: cancelling it is how a caller
// asks running tasks to stop early; the pool itself keeps running the tasks
// it holds until [Pool.Close]. Start panics if called twice.
func (p *Pool) Start(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		panic("worker: Start called twice")
	}
	p.started = true
	p.alive = p.workers
	for range p.workers {
		go p.loop(ctx)
	}
}

// Submit queues task under key without blocking, or returns ErrClosed after
// Close. Tasks may be submitted before Start; they run once it is called.
func (p *Pool) Submit(key string, task Task) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return ErrClosed
	}
	p.held.Add(1)
	if s := p.strands[key]; s != nil { // a worker has it or it is in ready
		s.tasks = append(s.tasks, task)
		return nil
	}
	s := &strand{key: key, tasks: []Task{task}}
	p.strands[key] = s
	p.ready = append(p.ready, s)
	p.work.Signal()
	return nil
}

// Full reports whether the pool holds as many tasks as its limit, or more.
// It takes no lock.
func (p *Pool) Full() bool { return p.held.Load() >= p.limit }

// Held returns the number of tasks submitted and not finished.
func (p *Pool) Held() int { return int(p.held.Load()) }

// Room returns a channel that is closed once the pool holds fewer tasks than
// its limit; it is closed already if it does now.
func (p *Pool) Room() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held.Load() < p.limit {
		return closedChan
	}
	p.roomWaiting = true
	return p.room
}

// Close stops new submissions. The workers run every task already submitted
// and then exit; [Pool.Done] is closed when they have. If Start was never
// called, nothing runs: Done is closed at once and the submitted tasks are
// dropped. Close is idempotent.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closing = true
	if !p.started {
		p.finishLocked()
	}
	p.work.Broadcast()
}

// Done returns a channel that is closed when the workers have exited after
// Close, or at Close if the pool was never started.
func (p *Pool) Done() <-chan struct{} { return p.done }

func (p *Pool) finishLocked() {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
}

func (p *Pool) loop(ctx context.Context) {
	// No deferred Unlock: a task that calls runtime.Goexit unwinds through
	// here with the mutex unlocked (see run).
	p.mu.Lock()
	for {
		for len(p.ready) == 0 && !(p.closing && p.held.Load() == 0) {
			p.work.Wait()
		}
		if len(p.ready) == 0 {
			p.leaveLocked()
			p.mu.Unlock()
			return
		}
		s := p.ready[0]
		p.ready[0] = nil
		p.ready = p.ready[1:]
		for {
			t, ok := s.pop()
			if !ok {
				delete(p.strands, s.key)
				break
			}
			p.mu.Unlock()
			if !p.run(ctx, s, t) {
				return // a new worker has taken this one's place
			}
			p.mu.Lock()
			p.doneLocked()
			// Stay with the key while nobody waits, which keeps its data
			// warm; otherwise let the next key have a turn, so one busy key
			// cannot starve the others. The key stays in strands, so new
			// tasks still queue behind it, and still runs on one worker at
			// a time.
			if len(p.ready) > 0 && !s.empty() {
				p.ready = append(p.ready, s)
				break
			}
		}
	}
}

// doneLocked accounts for a finished task.
func (p *Pool) doneLocked() {
	p.held.Add(-1)
	if p.roomWaiting && p.held.Load() < p.limit {
		p.roomWaiting = false
		close(p.room)
		p.room = make(chan struct{})
	}
}

// run runs t and reports whether this goroutine carries on as a worker. A
// task that panics or calls runtime.Goexit costs its goroutine: a Goexit
// ends it whatever we do, and so might onPanic, so the pool's books are put
// right and a new worker started before onPanic hears of it. This goroutine
// still counts as alive until onPanic returns, so that Done means that
// every call to onPanic has returned too.
func (p *Pool) run(ctx context.Context, s *strand, t Task) bool {
	return Try(func() error { t(ctx); return nil }, func(err error) {
		p.mu.Lock()
		p.doneLocked()
		if s.empty() {
			delete(p.strands, s.key)
		} else {
			p.ready = append(p.ready, s) // the key's later tasks, for any worker
			p.work.Signal()
		}
		p.alive++ // the new worker
		p.mu.Unlock()
		go p.loop(ctx)
		defer func() {
			p.mu.Lock()
			p.leaveLocked()
			p.mu.Unlock()
		}()
		p.onPanic(s.key, err.(*PanicError))
	})
}

// leaveLocked accounts for a goroutine that leaves the pool.
func (p *Pool) leaveLocked() {
	p.alive--
	if p.alive == 0 {
		p.finishLocked()
	}
	p.work.Broadcast() // let the other workers see the drained pool
}
