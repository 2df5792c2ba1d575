package store

import (
	"math"
	"slices"
	"time"
)

// Baseline is how long a kind's earlier completed jobs took: the median
// and 95th percentile of their run times over Jobs jobs; or, taken from
// the day roll-ups once those jobs are pruned, the median of Days days'
// medians and of their 95th percentiles (Jobs is then 0).
type Baseline struct {
	Median, P95 time.Duration
	Jobs, Days  int
}

// baselineOf is the Baseline of the run times ds, which it sorts: its
// percentiles interpolated between the two nearest, as PostgreSQL's
// percentile_cont takes them.
func baselineOf(ds []time.Duration) Baseline {
	slices.Sort(ds)
	at := func(p float64) time.Duration {
		pos := p * float64(len(ds)-1)
		i := int(pos)
		if i+1 >= len(ds) {
			return ds[i]
		}
		return ds[i] + time.Duration(math.Round((pos-float64(i))*float64(ds[i+1]-ds[i])))
	}
	return Baseline{Median: at(0.5), P95: at(0.95), Jobs: len(ds)}
}
