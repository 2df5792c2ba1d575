package alert

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// sendDigest records the day's digest, once, when its time has come.
func (a *Alerter) sendDigest(ctx context.Context, now time.Time) error {
	d := a.digest
	if d == nil {
		return nil
	}
	at := latestAt(now, d.hour, d.minute, d.loc)
	if now.Sub(at) > digestGrace {
		return nil
	}
	rv, err := a.c.Review(ctx, queue.ReviewQuery{From: at.Add(-24 * time.Hour), To: at})
	if err != nil {
		return fmt.Errorf("alert: digest: %w", err)
	}
	day := at.Format("2006-01-02")
	ep := store.AlertEpisode{Rule: TypeDigest, Key: day, State: store.EpisodeOnce, StartedAt: now, FiredAt: &now, Notified: true,
		Summary: digestSummary(day, rv)}
	notices, err := a.notices(ep, TypeDigest, now, digestText(rv))
	if err != nil {
		return err
	}
	if _, err := store.InsertEpisode(ctx, a.st, a.db, ep, notices); err != nil {
		return fmt.Errorf("alert: digest: %w", err)
	}
	return nil
}

func digestSummary(day string, rv *queue.Review) string {
	return fmt.Sprintf("%s: %d jobs, %d failed, %d slow, %d never ran, %d missed ticks, %d stopped chains",
		day, rv.Total, rv.Counts[queue.StatusFailed], int64(len(rv.Slow))+rv.MoreSlow, int64(len(rv.NeverRan))+rv.MoreNeverRan,
		len(rv.MissedTicks), int64(len(rv.Stopped))+rv.MoreStopped)
}

// digestText writes the review in lines, for a person.
func digestText(rv *queue.Review) string {
	var b strings.Builder
	statuses := make([]string, 0, len(rv.Counts))
	for s, n := range rv.Counts {
		statuses = append(statuses, fmt.Sprintf("%s %d", s, n))
	}
	slices.Sort(statuses)
	fmt.Fprintf(&b, "Jobs: %d (%s)\n", rv.Total, strings.Join(statuses, ", "))
	// A section lists the first 20 of the n the review listed, of the
	// n+more it found.
	section := func(title string, n int, more int64, line func(i int) string) {
		total := int64(n) + more
		if total == 0 {
			return
		}
		fmt.Fprintf(&b, "\n%s (%d):\n", title, total)
		for i := range min(n, 20) {
			b.WriteString("  " + line(i) + "\n")
		}
		if shown := int64(min(n, 20)); total > shown {
			fmt.Fprintf(&b, "  … and %d more\n", total-shown)
		}
	}
	section("Failed", len(rv.Failed), rv.MoreFailed, func(i int) string {
		j := rv.Failed[i]
		msg := ""
		if j.LastError != nil {
			msg = ": " + *j.LastError
		}
		return fmt.Sprintf("job %d %s%s", j.ID, j.Kind, msg)
	})
	section("Slow", len(rv.Slow), rv.MoreSlow, func(i int) string {
		s := rv.Slow[i]
		return fmt.Sprintf("job %d %s took %v (usually %v)", s.Job.ID, s.Job.Kind, s.Duration.Round(time.Second), s.Typical.Round(time.Second))
	})
	section("Never ran", len(rv.NeverRan), rv.MoreNeverRan, func(i int) string {
		j := rv.NeverRan[i]
		return fmt.Sprintf("job %d %s", j.ID, j.Kind)
	})
	section("Missed ticks", len(rv.MissedTicks), 0, func(i int) string {
		t := rv.MissedTicks[i]
		return fmt.Sprintf("%s at %s", t.Schedule, t.At.Format(time.RFC3339))
	})
	section("Stopped chains", len(rv.Stopped), rv.MoreStopped, func(i int) string {
		s := rv.Stopped[i]
		return fmt.Sprintf("rule %s, %s: child %s not released", s.Rule, s.Group, s.ChildKind)
	})
	return b.String()
}
