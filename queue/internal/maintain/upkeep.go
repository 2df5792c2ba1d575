package maintain

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Forever, as a retention, keeps what it applies to forever.
const Forever time.Duration = -1

// Durations are how long finished jobs are kept, by status: zero means
// the default (the client's, for a kind), Forever keeps them.
type Durations struct{ Completed, Cancelled, Failed time.Duration }

// Retention is what a client's options say of keeping jobs of type R.
type Retention[R any] struct {
	// Keep is the client's; Default fills what it leaves zero.
	Keep, Default Durations
	// History, Hours and Alerts are how long day roll-ups, hour roll-ups
	// and ended alert state are kept, defaults applied.
	History, Hours, Alerts time.Duration
	// Archive, if set, receives each batch of jobs before they go.
	Archive func(ctx context.Context, jobs []R) error
	// Kinds yields each kind's own Durations; it is read at every pass,
	// since kinds may be registered later.
	Kinds iter.Seq2[string, Durations]
}

// Upkeep returns the roll-up, run-count and pruning tasks of r, going by
// now (nil: the system clock), with kept told of the runs whose counts
// are kept (see RunCounts.Kept); roll-ups first, so that a leader that
// runs its tasks in order rolls a day up, and keeps a finished run's
// counts, before it prunes them (the pruner checks anyway).
func Upkeep[R any](st store.Store, db *gorm.DB, r Retention[R], kept func(context.Context, []string), now func() time.Time) []Task {
	return []Task{
		&Rollup{Store: st, Keep: r.History, Now: now},
		&HourRollup{Store: st, Keep: r.Hours, Now: now},
		RunCounts{Store: st, DB: db, Every: time.Minute, Kept: kept},
		&Prune{Store: st, Rules: r.rules, Archive: archiver(st, r.Archive), Now: now},
		&AlertPrune{Store: st, DB: db, Keep: r.Alerts, Now: now},
	}
}

// rules are the pruning rules of r at this moment: the kinds' overrides,
// sorted by kind and status, then the client's, with the defaults for
// what neither sets.
func (r Retention[R]) rules() []Keep {
	client := []Keep{
		keep("", "COMPLETED", cmp.Or(r.Keep.Completed, r.Default.Completed)),
		keep("", "CANCELLED", cmp.Or(r.Keep.Cancelled, r.Default.Cancelled)),
		keep("", "FAILED", cmp.Or(r.Keep.Failed, r.Default.Failed)),
	}
	var rules []Keep
	for kind, own := range r.Kinds {
		for i, d := range []time.Duration{own.Completed, own.Cancelled, own.Failed} {
			if d != 0 && d != client[i].For {
				rules = append(rules, keep(kind, client[i].Status, d))
			}
		}
	}
	slices.SortFunc(rules, func(a, b Keep) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Status, b.Status))
	})
	return append(rules, client...)
}

func keep(kind, status string, d time.Duration) Keep {
	return Keep{Kind: kind, Status: status, For: d, Forever: d == Forever}
}

// Flaw returns the field of a retention that cannot be used, its value and
// why, or "" for none: a duration neither zero, Forever nor min or more
// (minAlerts for Alerts), and, for a kind, a client-only field set
// (History, HourlyHistory, Alerts, or an archive).
func Flaw(kind bool, d Durations, history, hours, alerts time.Duration, archive bool, min, minAlerts time.Duration) (field string, value time.Duration, reason string) {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"Completed", d.Completed}, {"Cancelled", d.Cancelled}, {"Failed", d.Failed}, {"History", history}, {"HourlyHistory", hours}, {"Alerts", alerts}} {
		least := min
		if f.name == "Alerts" {
			least = minAlerts
		}
		switch {
		case kind && (f.name == "History" || f.name == "HourlyHistory" || f.name == "Alerts") && f.d != 0:
			return f.name, f.d, "is the client's, not a kind's"
		case f.d != 0 && f.d != Forever && f.d < least:
			return f.name, f.d, fmt.Sprintf("is neither KeepForever nor at least %v", least)
		}
	}
	if kind && archive {
		return "Archive", 0, "is the client's, not a kind's"
	}
	return "", 0, ""
}

// archiver hands archive the jobs of a batch, read in the batch's
// transaction; nil without an archive.
func archiver[R any](st store.Store, archive func(context.Context, []R) error) func(tx *gorm.DB, ids []int64) error {
	if archive == nil {
		return nil
	}
	return func(tx *gorm.DB, ids []int64) error {
		ctx := tx.Statement.Context
		var jobs []R
		if err := st.Jobs(ctx, tx, store.Filter{IDs: ids}, 0, &jobs); err != nil {
			return err
		}
		return archive(ctx, jobs)
	}
}
