package run

import "sync"

// Pool is a runner's workers: long-lived goroutines that take waiting items,
// oldest first, and run each with Run. Long-lived rather than a goroutine
// per item: their stacks stay grown, and a no-op job costs a wake-up.
type Pool[T any] struct {
	run func(T)

	mu       sync.Mutex
	workable *sync.Cond // on mu: waiting has items, or draining is set
	waiting  []T
	draining bool
	workers  sync.WaitGroup
}

// NewPool returns a pool whose workers run items with run.
func NewPool[T any](run func(T)) *Pool[T] {
	p := &Pool[T]{run: run}
	p.workable = sync.NewCond(&p.mu)
	return p
}

// Start starts n workers.
func (p *Pool[T]) Start(n int) {
	p.workers.Add(n)
	for range n {
		go p.work()
	}
}

// Replace starts a worker in place of one whose goroutine is ending
// without returning (its item called runtime.Goexit).
func (p *Pool[T]) Replace() {
	p.workers.Add(1)
	go p.work()
}

// Push queues items for the workers: at the back, or, with first, ahead of
// everything waiting.
func (p *Pool[T]) Push(first bool, items ...T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if first {
		p.waiting = append(items[:len(items):len(items)], p.waiting...)
	} else {
		p.waiting = append(p.waiting, items...)
	}
	for range items {
		p.workable.Signal()
	}
}

// Take removes the waiting items that pick selects and returns them, in
// order; no worker will run them. pick is called with the pool locked.
func (p *Pool[T]) Take(pick func(T) bool) []T {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []T
	kept := p.waiting[:0]
	for _, it := range p.waiting {
		if pick(it) {
			out = append(out, it)
		} else {
			kept = append(kept, it)
		}
	}
	clear(p.waiting[len(kept):])
	p.waiting = kept
	return out
}

// Oldest returns the item that has waited longest, if any waits.
func (p *Pool[T]) Oldest() (T, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.waiting) == 0 {
		var zero T
		return zero, false
	}
	return p.waiting[0], true
}

// Stop lets the workers run what waits and then return, and waits for them.
func (p *Pool[T]) Stop() {
	p.mu.Lock()
	p.draining = true
	p.workable.Broadcast()
	p.mu.Unlock()
	p.workers.Wait()
}

func (p *Pool[T]) work() {
	defer p.workers.Done()
	for {
		p.mu.Lock()
		for len(p.waiting) == 0 && !p.draining {
			p.workable.Wait()
		}
		if len(p.waiting) == 0 {
			p.mu.Unlock()
			return
		}
		var zero T
		it := p.waiting[0]
		p.waiting[0] = zero
		p.waiting = p.waiting[1:]
		p.mu.Unlock()
		p.run(it)
	}
}
