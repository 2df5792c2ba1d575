package queue

import (
	"fmt"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
)

// check refuses a filter whose strings PostgreSQL could not compare with
// a column.
func (f Filter) check() error {
	nv := []string{"Filter.Queue", f.Queue, "Filter.CorrelationID", f.CorrelationID,
		"Filter.RunID", f.RunID, "Filter.Period", f.Period, "Filter.Search", f.Search}
	for i, k := range f.Kinds {
		nv = append(nv, fmt.Sprintf("Filter.Kinds[%d]", i), k)
	}
	for i, s := range f.Statuses {
		nv = append(nv, fmt.Sprintf("Filter.Statuses[%d]", i), string(s))
	}
	return check.Texts(nv...)
}

// unpaged clears the fields of f that page through results, for the
// operations that act on every job f selects.
func (f *Filter) unpaged() { f.AfterID, f.BeforeID, f.Newest, f.Limit = 0, 0, false, 0 }
