package alert

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Silence mutes the notices of a rule's episodes until a time: an episode
// that fires while a silence covers it is recorded but not sent; if it
// still fires when the silence ends (expires or is removed), its notice is
// sent then. An episode that resolves while muted sends nothing; one
// whose firing was sent before the silence began still sends its
// resolution, so that whoever was told it fired is told it ended.
type Silence struct {
	ID int64
	// Rule is the rule's name; required.
	Rule string
	// Kind and Queue, when not empty, narrow the silence to the episodes
	// of that kind or queue.
	Kind, Queue string
	// Until is when the silence ends; it must be in the future.
	Until time.Time
	// Actor and Reason say who silenced it and why.
	Actor, Reason string
	CreatedAt     time.Time
}

// Silence records s and returns its ID. It takes effect at the next Run.
func (a *Alerter) Silence(ctx context.Context, s Silence) (int64, error) {
	now := a.cfg.now()
	switch {
	case s.Rule == "":
		return 0, fmt.Errorf("%w: a silence needs a rule", ErrInvalid)
	case !s.Until.After(now):
		return 0, fmt.Errorf("%w: silence until %s: not in the future", ErrInvalid, s.Until.Format(time.RFC3339))
	}
	for _, f := range []string{s.Rule, s.Kind, s.Queue, s.Actor, s.Reason} {
		if !utf8.ValidString(f) || strings.ContainsRune(f, 0) {
			return 0, fmt.Errorf("%w: silence: %q is not UTF-8 without NUL", ErrInvalid, f)
		}
	}
	id, err := store.AddSilence(ctx, a.st, a.db, store.AlertSilence{Rule: s.Rule, Kind: s.Kind, Queue: s.Queue, Until: s.Until,
		Actor: s.Actor, Reason: s.Reason, CreatedAt: now})
	if err != nil {
		return 0, fmt.Errorf("alert: silence: %w", err)
	}
	return id, nil
}

// Unsilence removes silence id, or returns ErrNotFound.
func (a *Alerter) Unsilence(ctx context.Context, id int64) error {
	ok, err := store.DeleteSilence(ctx, a.st, a.db, id)
	switch {
	case err != nil:
		return fmt.Errorf("alert: unsilence %d: %w", id, err)
	case !ok:
		return fmt.Errorf("%w: silence %d", ErrNotFound, id)
	}
	return nil
}

// Silences returns the silences in force, by ID.
func (a *Alerter) Silences(ctx context.Context) ([]Silence, error) {
	rows, err := store.Silences(ctx, a.st, a.db, a.cfg.now())
	if err != nil {
		return nil, fmt.Errorf("alert: silences: %w", err)
	}
	out := make([]Silence, 0, len(rows))
	for _, s := range rows {
		out = append(out, Silence(s))
	}
	return out, nil
}

// The states of an Episode.
const (
	StatePending  = store.EpisodePending  // the condition holds, not yet for long enough
	StateFiring   = store.EpisodeFiring   // the condition holds
	StateResolved = store.EpisodeResolved // it held, and no longer does
	StateDigest   = store.EpisodeOnce     // a digest, sent once for its day
)

// Episode is one stretch of time during which a rule's condition held for
// one key.
type Episode struct {
	ID                   int64
	Rule, Key, State     string
	Kind, Queue, Summary string
	StartedAt            time.Time
	FiredAt, ResolvedAt  *time.Time
	// Notified is true when its firing was announced (recorded for the
	// sinks); false while a silence mutes it.
	Notified bool
}

// EpisodeQuery selects episodes for Episodes.
type EpisodeQuery struct {
	// States keeps the episodes in these states; none: all.
	States []string
	// BeforeID pages: episodes with smaller IDs.
	BeforeID int64
	// Limit caps the result; 0 means 100, the most is 1,000.
	Limit int
}

// Episodes returns episodes, newest first.
func (a *Alerter) Episodes(ctx context.Context, q EpisodeQuery) ([]Episode, error) {
	limit := q.Limit
	switch {
	case limit == 0:
		limit = 100
	case limit < 0 || limit > 1000:
		return nil, fmt.Errorf("%w: limit %d not in [0, 1000]", ErrInvalid, limit)
	}
	for _, s := range q.States {
		switch s {
		case StatePending, StateFiring, StateResolved, StateDigest:
		default:
			return nil, fmt.Errorf("%w: episode state %q", ErrInvalid, s)
		}
	}
	rows, err := store.RecentEpisodes(ctx, a.db, q.States, q.BeforeID, limit)
	if err != nil {
		return nil, fmt.Errorf("alert: episodes: %w", err)
	}
	out := make([]Episode, 0, len(rows))
	for _, e := range rows {
		out = append(out, Episode(e))
	}
	return out, nil
}
