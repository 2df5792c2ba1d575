package enqueue

import (
	"context"
	"encoding/json"
	"maps"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/hook"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Overlay stores over with every row, over the row's own metadata own(i)
// where it has some. The rows without share one encoding.
func Overlay(rows []store.NewJob, own func(i int) map[string]string, over map[string]string) {
	var shared []byte
	for i := range rows {
		if m := own(i); m != nil {
			rows[i].Metadata = store.EncodeMetadata(Merged(m, over))
			continue
		}
		if shared == nil {
			shared = store.EncodeMetadata(over)
		}
		rows[i].Metadata = shared
	}
}

// Merged returns own with over's keys set over it.
func Merged(own, over map[string]string) map[string]string {
	m := make(map[string]string, len(own)+len(over))
	maps.Copy(m, own)
	maps.Copy(m, over)
	return m
}

// TraceMetadata is the metadata of a W3C trace context: nil without a
// traceparent.
func TraceMetadata(parent, state string) []byte {
	if parent == "" {
		return nil
	}
	m := map[string]string{"traceparent": parent}
	if state != "" {
		m["tracestate"] = state
	}
	return store.EncodeMetadata(m)
}

// Optional points at a copy of v, or is nil for the zero value.
func Optional[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

// Auth returns a job's auth claims as stored: nil for none, and an error
// for claims that do not encode as JSON or hold text jsonb would refuse.
func Auth(claims map[string]any) (*string, error) {
	if claims == nil {
		return nil, nil
	}
	b, err := json.Marshal(claims)
	if err != nil {
		return nil, check.Invalid("auth context does not encode as JSON: %v", err)
	}
	if err := check.Encoded("auth", claims, b, false); err != nil {
		return nil, err
	}
	return Optional(string(b)), nil
}

// Hooked runs the enqueue hooks that pick finds in hooks (see hook.Chain)
// for an enqueue of rows, then stores with every row the metadata meta
// returns, once they ran, over the row's own, own(i). It returns the
// context to insert with, and the function to report the result with,
// once: never nil.
func Hooked[H, R any](ctx context.Context, hooks []H, pick func(H) func(context.Context) (context.Context, func(R)),
	rows []store.NewJob, own func(i int) map[string]string, meta func() map[string]string) (context.Context, func(R)) {
	ctx, done := hook.Chain(ctx, hooks, pick)
	if m := meta(); len(m) > 0 {
		Overlay(rows, own, m)
	}
	if done == nil {
		done = func(R) {}
	}
	return ctx, done
}
