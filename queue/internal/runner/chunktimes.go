package runner

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// ChunkTimesKept is how many of an attempt's latest chunk durations
// ChunkTimes keeps; the count, the shortest, the longest and the sum cover
// them all.
const ChunkTimesKept = 50

// ChunkTimes is how long the chunks of a chunked job's attempt took, each
// measured around its handler's Process. It is saved with the job's
// progress after every chunk, in the same statement, so it costs no write
// of its own.
type ChunkTimes struct {
	Count         int64
	Min, Max, Sum time.Duration
	Recent        []time.Duration // the latest ChunkTimesKept, oldest first
}

// add records a chunk that took d.
func (t *ChunkTimes) add(d time.Duration) {
	d = d.Truncate(time.Microsecond) // as stored, so the sum is of what is shown
	if t.Count == 0 || d < t.Min {
		t.Min = d
	}
	t.Max = max(t.Max, d)
	t.Count++
	t.Sum += d
	if len(t.Recent) == ChunkTimesKept {
		copy(t.Recent, t.Recent[1:])
		t.Recent = t.Recent[:ChunkTimesKept-1]
	}
	t.Recent = append(t.Recent, d)
}

// AppendText encodes t as the store keeps it: whole microseconds
// separated by spaces, "count min max sum recent...". It is written by
// hand, not as JSON, to keep the update after each chunk cheap.
func (t *ChunkTimes) AppendText(b []byte) []byte {
	b = strconv.AppendInt(b, t.Count, 10)
	for _, d := range [...]time.Duration{t.Min, t.Max, t.Sum} {
		b = appendMicros(b, d)
	}
	for _, d := range t.Recent {
		b = appendMicros(b, d)
	}
	return b
}

func appendMicros(b []byte, d time.Duration) []byte {
	return strconv.AppendInt(append(b, ' '), d.Microseconds(), 10)
}

var errChunkTimes = errors.New("queue: malformed chunk times")

// ParseChunkTimes decodes what AppendText wrote; "" is no chunk yet.
func ParseChunkTimes(s string) (ChunkTimes, error) {
	var t ChunkTimes
	f := strings.Fields(s)
	if len(f) == 0 {
		return t, nil
	}
	if len(f) < 4 {
		return t, errChunkTimes
	}
	n := make([]int64, len(f))
	for i, v := range f {
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil || x < 0 {
			return t, errChunkTimes
		}
		n[i] = x
	}
	us := func(x int64) time.Duration { return time.Duration(x) * time.Microsecond }
	t.Count, t.Min, t.Max, t.Sum = n[0], us(n[1]), us(n[2]), us(n[3])
	t.Recent = make([]time.Duration, len(n)-4)
	for i, x := range n[4:] {
		t.Recent[i] = us(x)
	}
	return t, nil
}
