package queuetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// Lister reads jobs: a *queue.Client, or the *queue.TxClient of a
// transaction (Client.Tx), which also sees the jobs enqueued in that
// transaction before it commits.
type Lister interface {
	List(ctx context.Context, f queue.Filter) ([]queue.JobRecord, error)
}

// Enqueued is a stored job with its args decoded.
type Enqueued[A queue.Args] struct {
	Args A
	Job  queue.JobRecord
}

// ListEnqueued returns the jobs of A's kind that l holds, oldest first
// (the first 10,000), whatever their status.
func ListEnqueued[A queue.Args](ctx context.Context, l Lister) ([]Enqueued[A], error) {
	var zero A
	recs, err := l.List(ctx, queue.Filter{Kinds: []string{zero.Kind()}, Limit: 10_000})
	if err != nil {
		return nil, fmt.Errorf("queuetest: list %s jobs: %w", zero.Kind(), err)
	}
	out := make([]Enqueued[A], len(recs))
	for i, r := range recs {
		out[i].Job = r
		if err := json.Unmarshal(r.Payload, &out[i].Args); err != nil {
			return nil, fmt.Errorf("queuetest: job %d: %w: %v", r.ID, queue.ErrInvalidPayload, err)
		}
	}
	return out, nil
}

// Want describes what RequireEnqueued expects of a job besides its kind
// and args: the options it was enqueued with. Zero fields match anything.
type Want struct {
	Queue          string
	Priority       int
	MaxAttempts    int
	RunAt          time.Time // compared to the microsecond, as PostgreSQL keeps it
	IdempotencyKey string
	CorrelationID  string
	Status         queue.Status
	// Auth, if not nil, must equal the job's claims, compared as JSON.
	Auth queue.Auth
}

// RequireEnqueued fails the test unless l holds exactly one job of args's
// kind whose args equal args (compared as JSON) and that matches want,
// and returns it. The failure lists the jobs of the kind that l holds.
func RequireEnqueued[A queue.Args](t testing.TB, l Lister, args A, want Want) queue.JobRecord {
	t.Helper()
	jobs, err := ListEnqueued[A](context.Background(), l)
	if err != nil {
		t.Fatalf("%v", err)
	}
	wantArgs, err := json.Marshal(args)
	if err != nil {
		t.Fatalf("queuetest: %v", err)
	}
	var found []queue.JobRecord
	var seen []string
	for _, j := range jobs {
		got, _ := json.Marshal(j.Args) // re-encoded: jsonb reorders keys
		seen = append(seen, describe(j.Job, got))
		if bytes.Equal(got, wantArgs) && want.matches(j.Job) {
			found = append(found, j.Job)
		}
	}
	switch {
	case len(found) == 1:
		return found[0]
	case len(found) > 1:
		t.Fatalf("queuetest: %d %s jobs with args %s match, want one:\n%s", len(found), args.Kind(), wantArgs, strings.Join(seen, "\n"))
	case len(jobs) == 0:
		t.Fatalf("queuetest: no %s job enqueued", args.Kind())
	default:
		t.Fatalf("queuetest: no %s job with args %s matching %+v; enqueued:\n%s", args.Kind(), wantArgs, want, strings.Join(seen, "\n"))
	}
	return queue.JobRecord{}
}

// RequireNotEnqueued fails the test if l holds a job of A's kind.
func RequireNotEnqueued[A queue.Args](t testing.TB, l Lister) {
	t.Helper()
	jobs, err := ListEnqueued[A](context.Background(), l)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if len(jobs) > 0 {
		got, _ := json.Marshal(jobs[0].Args)
		t.Fatalf("queuetest: %d %s jobs enqueued, want none; the first: %s", len(jobs), jobs[0].Job.Kind, describe(jobs[0].Job, got))
	}
}

func (w Want) matches(r queue.JobRecord) bool {
	return (w.Queue == "" || w.Queue == r.Queue) &&
		(w.Priority == 0 || w.Priority == r.Priority) &&
		(w.MaxAttempts == 0 || w.MaxAttempts == r.MaxAttempts) &&
		(w.RunAt.IsZero() || w.RunAt.Truncate(time.Microsecond).Equal(r.RunAt.Truncate(time.Microsecond))) &&
		(w.IdempotencyKey == "" || r.IdempotencyKey != nil && w.IdempotencyKey == *r.IdempotencyKey) &&
		(w.CorrelationID == "" || r.CorrelationID != nil && w.CorrelationID == *r.CorrelationID) &&
		(w.Status == "" || w.Status == r.Status) &&
		(w.Auth == nil || sameJSON(w.Auth, r.Auth))
}

// sameJSON compares claims as stored: JSON, with map keys sorted.
func sameJSON(a, b queue.Auth) bool {
	ja, ea := json.Marshal(map[string]any(a))
	jb, eb := json.Marshal(map[string]any(b))
	return ea == nil && eb == nil && bytes.Equal(ja, jb)
}

// describe is one job in a failure message; it leaves out the claims.
func describe(r queue.JobRecord, args []byte) string {
	s := fmt.Sprintf("  job %d: args %s queue %s priority %d max attempts %d run at %s status %s",
		r.ID, args, r.Queue, r.Priority, r.MaxAttempts, r.RunAt.Format(time.RFC3339Nano), r.Status)
	if r.IdempotencyKey != nil {
		s += " idempotency key " + *r.IdempotencyKey
	}
	if r.CorrelationID != nil {
		s += " correlation ID " + *r.CorrelationID
	}
	return s
}
