package pgtest

import (
	"context"
	"database/sql"
	"slices"
	"sync"
)

// parkedBudget bounds the idle connections that the pools waiting with
// their schemas keep, all together, in one process. Each pool keeps up to
// parkedIdle; with a dozen keys and their parallel tests' schemas, a
// process kept some eighty idle connections, and the two test processes
// that go test runs at once filled the server's hundred.
const parkedBudget = 12

// parkedPools are the pools waiting with their schemas, oldest first.
var parkedPools struct {
	mu  sync.Mutex
	dbs []*sql.DB
}

// park has db wait with its schema; the oldest waiting pools give up
// their idle connections while all keep more than parkedBudget.
func park(db *sql.DB) {
	parkedPools.mu.Lock()
	defer parkedPools.mu.Unlock()
	parkedPools.dbs = append(parkedPools.dbs, db)
	trimParked(parkedBudget)
}

// unpark takes db off the waiting pools, as a test takes it (or it is
// closed).
func unpark(db *sql.DB) {
	parkedPools.mu.Lock()
	defer parkedPools.mu.Unlock()
	parkedPools.dbs = slices.DeleteFunc(parkedPools.dbs, func(d *sql.DB) bool { return d == db })
}

// trimParked closes the idle connections of the oldest waiting pools
// until all keep at most budget. parkedPools.mu is held.
func trimParked(budget int) {
	kept := 0
	for _, db := range slices.Backward(parkedPools.dbs) {
		n := db.Stats().Idle
		if kept+n > budget {
			db.SetMaxIdleConns(0) // closes them; a test that takes the pool sizes it again
			n = 0
		}
		kept += n
	}
}

// shed closes every idle connection this process keeps to the shared
// server but its tests' own: the waiting pools' and those that create and
// reset schemas. It is called when the server is full, so that a test of
// this process, or of another, gets the slots back.
func shed() {
	parkedPools.mu.Lock()
	trimParked(0)
	parkedPools.mu.Unlock()
	reused.closeIdle()
}

// closeIdle closes the idle connections that create and reset schemas.
func (r *schemas) closeIdle() {
	r.mu.Lock()
	idle := r.idle
	r.idle = nil
	r.mu.Unlock()
	for _, c := range idle {
		_ = c.Close(context.Background())
	}
}
