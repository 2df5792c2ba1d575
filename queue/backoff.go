package queue

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
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

// longest is where backoffs stop growing, so that a job's millionth attempt
// does not overflow to no wait at all: some 146 years.
const longest = time.Duration(math.MaxInt64 / 2)

// Delay implements Backoff.
func (e Exponential) Delay(attempt int) time.Duration {
	d := e.Base
	for i := 1; i < attempt && (e.Max <= 0 || d < e.Max) && d < longest/2; i++ {
		d *= 2
	}
	if e.Max > 0 && d > e.Max {
		d = e.Max
	}
	return jitter(d, e.Jitter)
}

// Linear waits Step × attempt, capped at Max if positive: 1s, 2s, 3s for a
// Step of one second.
type Linear struct {
	Step time.Duration
	Max  time.Duration
}

// Delay implements Backoff.
func (l Linear) Delay(attempt int) time.Duration {
	n := time.Duration(max(attempt, 1))
	d := longest
	if l.Step <= longest/n {
		d = l.Step * n
	}
	if l.Max > 0 && d > l.Max {
		d = l.Max
	}
	return d
}

// Delays waits its attempt-th entry: Delays{time.Minute, 5 * time.Minute,
// 15 * time.Minute} waits one, five, then fifteen minutes. Attempts beyond its length
// wait its last entry; an empty Delays waits nothing.
type Delays []time.Duration

// Delay implements Backoff.
func (s Delays) Delay(attempt int) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[min(max(attempt, 1), len(s))-1]
}

func jitter(d time.Duration, frac float64) time.Duration {
	if frac <= 0 || d <= 0 {
		return d
	}
	span := float64(d) * min(frac, 1)
	return d + time.Duration((rand.Float64()*2-1)*span)
}

// backoffJSON is how a per-job backoff is stored, so that any runner can
// apply it.
type backoffJSON struct {
	Type   string          `json:"type"`
	Base   time.Duration   `json:"base,omitempty"`
	Max    time.Duration   `json:"max,omitempty"`
	Jitter float64         `json:"jitter,omitempty"`
	Step   time.Duration   `json:"step,omitempty"`
	Delays []time.Duration `json:"delays,omitempty"`
}

func encodeBackoff(b Backoff) ([]byte, error) {
	var j backoffJSON
	switch b := b.(type) {
	case Exponential:
		j = backoffJSON{Type: "exponential", Base: b.Base, Max: b.Max, Jitter: b.Jitter}
	case Linear:
		j = backoffJSON{Type: "linear", Step: b.Step, Max: b.Max}
	case Delays:
		j = backoffJSON{Type: "delays", Delays: b}
	default:
		return nil, invalid("a job's own backoff must be Exponential, Linear or Delays, not %T (a kind's backoff may be any Backoff)", b)
	}
	return json.Marshal(j)
}

func decodeBackoff(data []byte) (Backoff, error) {
	var j backoffJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, err
	}
	switch j.Type {
	case "exponential":
		return Exponential{Base: j.Base, Max: j.Max, Jitter: j.Jitter}, nil
	case "linear":
		return Linear{Step: j.Step, Max: j.Max}, nil
	case "delays":
		return Delays(j.Delays), nil
	}
	return nil, fmt.Errorf("queue: unknown stored backoff %q", j.Type)
}

func validBackoff(b Backoff) error {
	switch b := b.(type) {
	case nil:
		return invalid("nil backoff")
	case Exponential:
		if b.Base <= 0 || b.Max < 0 || b.Jitter < 0 || b.Jitter > 1 {
			return invalid("exponential backoff needs Base > 0, Max >= 0 and Jitter in [0, 1]: %+v", b)
		}
	case Linear:
		if b.Step <= 0 || b.Max < 0 {
			return invalid("linear backoff needs Step > 0 and Max >= 0: %+v", b)
		}
	case Delays:
		for _, d := range b {
			if d < 0 {
				return invalid("delays backoff has a negative delay: %v", b)
			}
		}
	}
	return nil
}
