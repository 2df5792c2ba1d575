package operate

import (
	"context"
	"encoding/json"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// RecordAudit checks e and appends it to the audit log, as
// queue.Client.RecordAudit says; Target may be empty.
func RecordAudit(ctx context.Context, st store.Store, db *gorm.DB, e store.AuditEntry) (int64, error) {
	if e.Action == "" {
		return 0, check.Invalid("audit entry without an action")
	}
	if err := check.Texts("AuditEntry.Actor", e.Actor, "AuditEntry.Action", e.Action, "AuditEntry.Result", e.Result); err != nil {
		return 0, err
	}
	if len(e.Target) == 0 {
		e.Target = nil // NULL
	} else if !json.Valid(e.Target) {
		return 0, check.Invalid("AuditEntry.Target is not JSON")
	} else if err := check.Raw(e.Target); err != nil {
		return 0, check.Invalid("AuditEntry.Target: %v", err)
	}
	id, err := st.RecordAudit(ctx, db, e)
	return id, check.Failed(ctx, "record audit", err)
}

// AuditLog returns a page of the audit log, as queue.Client.AuditLog says.
func AuditLog(ctx context.Context, st store.Store, db *gorm.DB, beforeID int64, limit int) ([]store.AuditEntry, error) {
	limit, err := check.PageLimit(limit, 1000)
	if err != nil {
		return nil, err
	}
	rows, err := st.AuditLog(ctx, db, beforeID, limit)
	return rows, check.Failed(ctx, "audit log", err)
}

// TicksPage is a queue.TicksQuery; After is set when the query continues
// after the tick of AfterSchedule at AfterAt.
type TicksPage struct {
	Schedule, Outcome string
	From, To          time.Time
	After             bool
	AfterSchedule     string
	AfterAt           time.Time
	Limit             int
}

// Store checks q and returns it as the store's query.
func (q TicksPage) Store() (store.TicksQuery, error) {
	limit, err := check.PageLimit(q.Limit, 10_000)
	if err != nil {
		return store.TicksQuery{}, err
	}
	switch q.Outcome {
	case "", store.TickFired, store.TickLate, store.TickMissed:
	default:
		return store.TicksQuery{}, check.Invalid("ticks: outcome %q is none of fired, late, missed", q.Outcome)
	}
	if err := check.Text("TicksQuery.Schedule", q.Schedule); err != nil {
		return store.TicksQuery{}, err
	}
	sq := store.TicksQuery{From: q.From, To: q.To, Limit: limit}
	if q.Schedule != "" {
		sq.Schedules = []string{q.Schedule}
	}
	if q.Outcome != "" {
		sq.Outcomes = []string{q.Outcome}
	}
	if q.After {
		if q.AfterAt.IsZero() {
			return store.TicksQuery{}, check.Invalid("TicksQuery.After has no At")
		}
		if err := check.Text("TicksQuery.After.Schedule", q.AfterSchedule); err != nil {
			return store.TicksQuery{}, err
		}
		sq.Before, sq.BeforeSchedule = q.AfterAt, q.AfterSchedule
	}
	return sq, nil
}

// RunsPage is a queue.RunsQuery; After is set when the query continues
// after the run AfterRunID, whose first job was created at AfterFirst.
type RunsPage struct {
	Period                 string
	FirstFrom, FirstBefore time.Time
	After                  bool
	AfterRunID             string
	AfterFirst             time.Time
	Limit                  int
}

// Store checks q and returns it as the store's query.
func (q RunsPage) Store() (store.RunsQuery, error) {
	limit, err := check.PageLimit(q.Limit, 10_000)
	if err != nil {
		return store.RunsQuery{}, err
	}
	if err := check.Text("RunsQuery.Period", q.Period); err != nil {
		return store.RunsQuery{}, err
	}
	sq := store.RunsQuery{Period: q.Period, FirstFrom: q.FirstFrom, FirstBefore: q.FirstBefore, Limit: limit}
	if q.After {
		if q.AfterRunID == "" {
			return store.RunsQuery{}, check.Invalid("RunsQuery.After has no RunID")
		}
		if err := check.Text("RunsQuery.After.RunID", q.AfterRunID); err != nil {
			return store.RunsQuery{}, err
		}
		sq.AfterFirst, sq.AfterRunID = q.AfterFirst, q.AfterRunID
	}
	return sq, nil
}
