package console

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue/queuetest"
)

// source is a reading that a test lets finish: each read says it began on
// began, then returns what the test sends on answers.
type source struct {
	began   chan struct{}
	answers chan answer
}

type answer struct {
	v   int
	err error
}

func newSource() *source {
	return &source{began: make(chan struct{}, 1), answers: make(chan answer)}
}

func (s *source) read(ctx context.Context) (int, error) {
	s.began <- struct{}{}
	select {
	case a := <-s.answers:
		return a.v, a.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// getNow reads c with src, answering the reading it starts with a.
func getNow(t *testing.T, c *cached[int], src *source, ttl time.Duration, a answer) (int, time.Time, error) {
	t.Helper()
	type got struct {
		v   int
		at  time.Time
		err error
	}
	done := make(chan got, 1)
	go func() {
		v, at, err := c.get(context.Background(), ttl, src.read)
		done <- got{v, at, err}
	}()
	<-src.began
	src.answers <- a
	g := <-done
	return g.v, g.at, g.err
}

// readOnce returns a cache on a fake clock, and the source it reads, after
// a first reading that read 1.
func readOnce(t *testing.T, ttl time.Duration) (*cached[int], *queuetest.Clock, *source) {
	t.Helper()
	clock := queuetest.NewClock(time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC))
	c := &cached[int]{now: clock.Now}
	src := newSource()
	v, _, err := getNow(t, c, src, ttl, answer{v: 1})
	require.NoError(t, err)
	require.Equal(t, 1, v)
	return c, clock, src
}

// settled waits until c's reading afresh has ended.
func settled(t *testing.T, c *cached[int]) {
	t.Helper()
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.refreshing
	}, 10*time.Second, time.Millisecond)
}

// A value older than the cache's time, but not StaleTTLs times older, is
// returned at once while one reading afresh runs in the background; the
// calls after it get what that reading read.
func TestCachedServesStaleWhileItReadsAfresh(t *testing.T) {
	const ttl = 5 * time.Second
	c, clock, src := readOnce(t, ttl)
	first := clock.Now()

	clock.Advance(ttl - time.Millisecond)
	v, at, err := c.get(context.Background(), ttl, src.read) // no reading: src would block
	require.NoError(t, err)
	require.Equal(t, 1, v)
	require.Equal(t, first, at)

	clock.Advance(2 * ttl)
	for range 3 { // one reading afresh, however many ask
		v, at, err = c.get(context.Background(), ttl, src.read)
		require.NoError(t, err)
		require.Equal(t, 1, v, "the stale value, at once")
		require.Equal(t, first, at)
	}
	<-src.began
	src.answers <- answer{v: 2}
	require.Eventually(t, func() bool {
		v, _, _ := c.get(context.Background(), ttl, src.read)
		return v == 2
	}, 10*time.Second, time.Millisecond)
	_, at, _ = c.get(context.Background(), ttl, src.read)
	require.Equal(t, first.Add(3*ttl-time.Millisecond), at, "read when the reading afresh began")
	require.Empty(t, src.began, "no reading beyond the one")
}

// A value StaleTTLs times older than the cache's time, or none, is read
// while the caller waits.
func TestCachedReadsTooOldAValueAtOnce(t *testing.T) {
	const ttl = time.Second
	c, clock, src := readOnce(t, ttl)
	clock.Advance(StaleTTLs * ttl)
	v, at, err := getNow(t, c, src, ttl, answer{v: 2})
	require.NoError(t, err)
	require.Equal(t, 2, v)
	require.Equal(t, clock.Now(), at)
}

// A reading afresh that fails leaves the value before it, and the next call
// starts another.
func TestCachedKeepsItsValueWhenAReadingAfreshFails(t *testing.T) {
	const ttl = time.Second
	c, clock, src := readOnce(t, ttl)
	clock.Advance(2 * ttl)
	v, _, err := getNow(t, c, src, ttl, answer{err: errors.New("server gone")})
	require.NoError(t, err)
	require.Equal(t, 1, v)
	settled(t, c)
	v, _, err = getNow(t, c, src, ttl, answer{v: 3})
	require.NoError(t, err)
	require.Equal(t, 1, v, "the old value, while the next reading runs")
	require.Eventually(t, func() bool {
		v, _, _ := c.get(context.Background(), ttl, src.read)
		return v == 3
	}, 10*time.Second, time.Millisecond)
}

// What a reading afresh read before a clear (the console's own pause, say)
// is not kept: the next call reads after the change.
func TestCachedDropsAReadingFromBeforeAClear(t *testing.T) {
	const ttl = time.Second
	c, clock, src := readOnce(t, ttl)
	clock.Advance(2 * ttl)
	v, _, err := c.get(context.Background(), ttl, src.read)
	require.NoError(t, err)
	require.Equal(t, 1, v)
	<-src.began // the reading afresh began
	clock.Advance(time.Millisecond)
	c.clear()
	src.answers <- answer{v: 2} // read before the clear
	settled(t, c)
	v, _, err = getNow(t, c, src, ttl, answer{v: 3})
	require.NoError(t, err)
	require.Equal(t, 3, v)
}
