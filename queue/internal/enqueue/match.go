// Package enqueue is the part of package queue's enqueue that works on
// stored rows: inserting them, one statement or a bulk, lining up the rows
// an insert returned with the jobs asked for, and finding the jobs whose
// idempotency keys were taken. It works on queue's job record type R, which
// it cannot import.
package enqueue

import (
	"errors"
	"fmt"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// ErrFewer says that an insert returned fewer rows than it was given.
var ErrFewer = errors.New("fewer rows inserted than asked for")

// Match lines the inserted records up with rows, the jobs asked for, and
// calls set for each row with its record and whether it was a duplicate:
// a job that held its key already. key is a record's idempotency key.
// Rows were inserted in order, so rows without a key take the inserted
// records without one in order. existing reads the jobs that hold the
// keys of the duplicates, in a new statement so that a job committed by a
// concurrent enqueue is visible too.
func Match[R any](rows []store.NewJob, inserted []R, key func(*R) *string, existing func(keys []string) ([]R, error), set func(i int, r *R, dup bool)) error {
	byKey := map[string]*R{}
	for i := range inserted {
		if k := key(&inserted[i]); k != nil {
			byKey[*k] = &inserted[i]
		}
	}
	next := 0
	var missing []string
	var unmatched []int
	claimed := map[string]bool{} // keys whose inserted row went to an earlier input
	for i, r := range rows {
		if r.Key == nil {
			for next < len(inserted) && key(&inserted[next]) != nil {
				next++
			}
			if next == len(inserted) {
				return ErrFewer
			}
			set(i, &inserted[next], false)
			next++
			continue
		}
		if rec := byKey[*r.Key]; rec != nil && !claimed[*r.Key] {
			set(i, rec, false)
			claimed[*r.Key] = true
			continue
		}
		missing, unmatched = append(missing, *r.Key), append(unmatched, i)
	}
	if len(missing) == 0 {
		return nil
	}
	found, err := existing(missing)
	if err != nil {
		return fmt.Errorf("read duplicates: %w", err)
	}
	have := map[string]*R{}
	for i := range found {
		have[*key(&found[i])] = &found[i]
	}
	for k, rec := range byKey { // inserted by an earlier input of this call
		have[k] = rec
	}
	for i, k := range missing {
		rec := have[k]
		if rec == nil {
			return fmt.Errorf("idempotency key %q conflicted but its job is gone; retry", k)
		}
		set(unmatched[i], rec, true)
	}
	return nil
}
