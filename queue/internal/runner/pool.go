package runner

import (
	"database/sql"
	"fmt"
	"reflect"
	"strings"
)

// PoolAdvice says what to set when a pool would serve workers badly,
// assuming their handlers use it, as they commonly do; "" when it is fine.
// room is how many more connections the server accepts.
func PoolAdvice(db *sql.DB, workers, room int) string {
	need := workers + Conns
	open := db.Stats().MaxOpenConnections
	var advice []string
	if open == 0 && need > room {
		advice = append(advice, fmt.Sprintf("it has no limit on open connections, so handlers that each take one may need %d, "+
			"and the server accepts %d more (beyond that it refuses them, SQLSTATE 53300): "+
			"call SetMaxOpenConns with what the server can spare", need, max(room, 0)))
		need = max(room, Conns)
	}
	if open > 0 {
		need = min(need, open)
	}
	if idle, known := maxIdleConns(db); known && idle < need {
		advice = append(advice, fmt.Sprintf("it keeps at most %d idle connections, so handlers open and close a connection "+
			"for most of their statements: call SetMaxIdleConns(%d), as many as it may open", idle, need))
	}
	return strings.Join(advice, "; ")
}

// maxIdleConns reads the pool's idle limit, which database/sql takes
// (SetMaxIdleConns) but does not report. It reads the field by reflection,
// once at start, and reports false if a Go release has renamed it: the
// advice is then left out, nothing else changes.
func maxIdleConns(db *sql.DB) (n int, known bool) {
	f := reflect.ValueOf(db).Elem().FieldByName("maxIdleCount")
	if !f.IsValid() || f.Kind() != reflect.Int {
		return 0, false
	}
	switch n := int(f.Int()); {
	case n == 0:
		return 2, true // database/sql's default
	case n < 0:
		return 0, true
	default:
		return n, true
	}
}
