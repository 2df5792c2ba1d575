// Package backoff is the arithmetic of package queue's backoffs
// (Exponential, Linear, Delays), which delegate their Delay here, and the
// form in which a job's own backoff is stored with it, which the runner
// reads back. Its types have the fields of package queue's, so that each
// converts to the other.
package backoff

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Longest is where backoffs stop growing, so that a job's millionth attempt
// does not overflow to no wait at all: some 146 years.
const Longest = time.Duration(math.MaxInt64 / 2)

// Backoff is queue.Backoff: how long a job waits after its attempt-th
// attempt failed.
type Backoff interface {
	Delay(attempt int) time.Duration
}

// Exponential is queue.Exponential.
type Exponential struct {
	Base   time.Duration
	Max    time.Duration
	Jitter float64
}

// Delay waits Base × 2^(attempt-1), capped at Max (if positive), then moved
// by up to ±Jitter of itself at random.
func (e Exponential) Delay(attempt int) time.Duration {
	d := e.Base
	for i := 1; i < attempt && (e.Max <= 0 || d < e.Max) && d < Longest/2; i++ {
		d *= 2
	}
	if e.Max > 0 && d > e.Max {
		d = e.Max
	}
	return jitter(d, e.Jitter)
}

// Linear is queue.Linear.
type Linear struct {
	Step time.Duration
	Max  time.Duration
}

// Delay waits Step × attempt, capped at Max if positive.
func (l Linear) Delay(attempt int) time.Duration {
	n := time.Duration(max(attempt, 1))
	d := Longest
	if l.Step <= Longest/n {
		d = l.Step * n
	}
	if l.Max > 0 && d > l.Max {
		d = l.Max
	}
	return d
}

// Delays is queue.Delays.
type Delays []time.Duration

// Delay waits the attempt-th entry, the last one beyond them, or nothing
// if there is none.
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

// Flaw says why b is not a backoff that works; "" if it is. Kinds of
// backoff other than these three are the user's, and not checked.
func Flaw(b any) string {
	switch b := b.(type) {
	case nil:
		return "nil backoff"
	case Exponential:
		if b.Base <= 0 || b.Max < 0 || b.Jitter < 0 || b.Jitter > 1 {
			return fmt.Sprintf("exponential backoff needs Base > 0, Max >= 0 and Jitter in [0, 1]: %+v", b)
		}
	case Linear:
		if b.Step <= 0 || b.Max < 0 {
			return fmt.Sprintf("linear backoff needs Step > 0 and Max >= 0: %+v", b)
		}
	case Delays:
		for _, d := range b {
			if d < 0 {
				return fmt.Sprintf("delays backoff has a negative delay: %v", b)
			}
		}
	}
	return ""
}

// stored is how a job's own backoff is stored, so that any runner can
// apply it.
type stored struct {
	Type   string          `json:"type"`
	Base   time.Duration   `json:"base,omitempty"`
	Max    time.Duration   `json:"max,omitempty"`
	Jitter float64         `json:"jitter,omitempty"`
	Step   time.Duration   `json:"step,omitempty"`
	Delays []time.Duration `json:"delays,omitempty"`
}

// ErrNotStored is Encode's error for a backoff it does not store.
var ErrNotStored = errors.New("not a backoff that can be stored")

// Encode returns the stored form of b, an Exponential, a Linear or a
// Delays; ErrNotStored for any other.
func Encode(b any) ([]byte, error) {
	var s stored
	switch b := b.(type) {
	case Exponential:
		s = stored{Type: "exponential", Base: b.Base, Max: b.Max, Jitter: b.Jitter}
	case Linear:
		s = stored{Type: "linear", Step: b.Step, Max: b.Max}
	case Delays:
		s = stored{Type: "delays", Delays: b}
	default:
		return nil, ErrNotStored
	}
	return json.Marshal(s)
}

// Decode reads a backoff Encode stored.
func Decode(data []byte) (Backoff, error) {
	var s stored
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, err
	}
	switch s.Type {
	case "exponential":
		return Exponential{Base: s.Base, Max: s.Max, Jitter: s.Jitter}, nil
	case "linear":
		return Linear{Step: s.Step, Max: s.Max}, nil
	case "delays":
		return Delays(s.Delays), nil
	}
	return nil, fmt.Errorf("queue: unknown stored backoff %q", s.Type)
}
