package runner

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/run"
)

// PoolWarning is the message of the runner's warnings about its pool.
const PoolWarning = "queue: the connection pool cannot serve the runner's workers well"

// PoolAdvice says what to set when a pool with at most open connections
// (0: no limit) would serve workers badly, assuming their handlers use it,
// as they commonly do; "" when it is fine. room is how many more
// connections the server accepts. need is how many connections the
// workers and the runner can use at once: as many as the pool should keep
// idle.
func PoolAdvice(open, workers, room int) (advice string, need int) {
	need = workers + Conns
	if open == 0 && need > room {
		advice = fmt.Sprintf("it has no limit on open connections, so handlers that each take one may need %d, "+
			"and the server accepts %d more (beyond that it refuses them, SQLSTATE 53300): "+
			"call SetMaxOpenConns with what the server can spare", need, max(room, 0))
		need = max(room, Conns)
	}
	if open > 0 {
		need = min(need, open)
	}
	return advice, need
}

// idleWatch warns, once, when the pool keeps too few idle connections for
// what the runner's handlers use at once: each connection returned to a
// full idle list is closed, so handlers open a connection for a statement
// and throw it away after. database/sql does not report the idle limit,
// but counts those closes (DBStats.MaxIdleClosed); the watch reads the
// count every Every and warns when it grew by limit or more.
type idleWatch struct {
	run.Periodic
	db     *sql.DB
	log    *slog.Logger
	need   int   // the idle limit to advise (PoolAdvice)
	limit  int64 // closes within one Every that earn the warning
	last   int64 // MaxIdleClosed at the last check
	warned bool
}

// The idle watch looks every idleWatchEvery and warns when the pool closed
// idleClosesPerSecond a second or more: a rate at which opening
// connections costs the server (a PostgreSQL backend each) real work,
// where a few closes in a burst cost nothing worth a warning.
const (
	idleWatchEvery      = 30 * time.Second
	idleClosesPerSecond = 10
)

// WatchIdle makes the watch of idle connections look every every and warn
// at limit closes, where the defaults would need a test to run for long.
// Call it before Start.
func (r *Runner) WatchIdle(every time.Duration, limit int64) {
	r.idle.Every, r.idle.limit = every, limit
}

// arm readies the watch before the runner starts it: its count starts at
// the pool's.
func (w *idleWatch) arm(db *sql.DB, log *slog.Logger, need int) {
	if w.Every == 0 {
		w.Every, w.limit = idleWatchEvery, int64(idleWatchEvery/time.Second)*idleClosesPerSecond
	}
	w.db, w.log, w.need, w.last = db, log, need, db.Stats().MaxIdleClosed
	w.Do = func(context.Context) { w.check() }
}

// Stop stops the watch, looking a last time: a runner that ran for less
// than Every is judged on what its handlers did.
func (w *idleWatch) Stop() {
	w.Periodic.Stop()
	if w.db != nil {
		w.check()
	}
}

// check warns if the pool closed limit connections or more since the last
// check, unless the watch has warned already.
func (w *idleWatch) check() {
	closed := w.db.Stats().MaxIdleClosed
	n := closed - w.last
	w.last = closed
	if w.warned || n < w.limit {
		return
	}
	w.warned = true
	w.log.Warn(PoolWarning, "advice", fmt.Sprintf("it closed %d connections within %s because it keeps too few idle: "+
		"handlers open and close a connection for most of their statements: "+
		"call SetMaxIdleConns(%d), as many as it may open", n, w.Every, w.need))
}

// DefaultID names a runner by its host, its process and a random suffix.
func DefaultID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
