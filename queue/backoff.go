package queue

import (
	"errors"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/backoff"
	"github.com/sheaf-dev/sheaf/queue/internal/check"
)

// Backoff decides how long a failed job waits before its next attempt.
// attempt is the attempt that just failed, starting at 1. The wait is added
// to the database's clock, not the worker's.
type Backoff interface {
	Delay(attempt int) time.Duration
}

// DefaultBackoff returns the backoff of jobs whose kind and job set none:
// 1s, 2s, 4s, ... capped at 5 minutes, with 10% jitter.
func DefaultBackoff() Backoff { return defaultBackoff }

var defaultBackoff = Exponential{Base: time.Second, Max: 5 * time.Minute, Jitter: 0.1}

// Exponential waits Base × 2^(attempt-1), capped at Max (if positive), then
// moved by up to ±Jitter of itself at random (Jitter 0.1 is ±10%), so that
// jobs that failed together do not all retry together.
type Exponential struct {
	Base   time.Duration
	Max    time.Duration
	Jitter float64
}

// Delay implements Backoff.
func (e Exponential) Delay(attempt int) time.Duration { return backoff.Exponential(e).Delay(attempt) }

// Linear waits Step × attempt, capped at Max if positive: 1s, 2s, 3s for a
// Step of one second.
type Linear struct {
	Step time.Duration
	Max  time.Duration
}

// Delay implements Backoff.
func (l Linear) Delay(attempt int) time.Duration { return backoff.Linear(l).Delay(attempt) }

// Delays waits its attempt-th entry: Delays{time.Minute, 5 * time.Minute,
// 15 * time.Minute} waits one, five, then fifteen minutes. Attempts beyond its length
// wait its last entry; an empty Delays waits nothing.
type Delays []time.Duration

// Delay implements Backoff.
func (s Delays) Delay(attempt int) time.Duration { return backoff.Delays(s).Delay(attempt) }

// stored returns b as package backoff's type, for the three kinds of
// backoff a job can store; b itself for any other.
func stored(b Backoff) any {
	switch b := b.(type) {
	case Exponential:
		return backoff.Exponential(b)
	case Linear:
		return backoff.Linear(b)
	case Delays:
		return backoff.Delays(b)
	}
	return b
}

// encodeBackoff returns the form of b stored with a job.
func encodeBackoff(b Backoff) ([]byte, error) {
	data, err := backoff.Encode(stored(b))
	if errors.Is(err, backoff.ErrNotStored) {
		return nil, check.Invalid("a job's own backoff must be Exponential, Linear or Delays, not %T (a kind's backoff may be any Backoff)", b)
	}
	return data, err
}

// validBackoff refuses a backoff that does not work, such as an
// Exponential without a Base.
func validBackoff(b Backoff) error {
	if flaw := backoff.Flaw(stored(b)); flaw != "" {
		return check.Invalid("%s", flaw)
	}
	return nil
}
