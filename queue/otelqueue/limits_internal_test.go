package otelqueue

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
)

// A limit's use is the more used of its concurrency and its rate.
func TestLimitUse(t *testing.T) {
	use := func(conc, running, rate, started int) float64 {
		return limitUse(queue.LimitUse{Limit: queue.Limit{Concurrency: conc, Rate: rate}, Running: running, Started: started})
	}
	require.Equal(t, 0.75, use(4, 3, 0, 0))
	require.Equal(t, 1.0, use(4, 3, 10, 10), "the rate is spent")
	require.Equal(t, 0.5, use(0, 7, 10, 5), "no concurrency limit: the running do not count")
}
