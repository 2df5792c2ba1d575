package store

// The state of package queue/alert (schema version 10): episodes of its
// rules, the notifications they owe their sinks, and silences. The same
// statements serve both databases; times are bound as each compares them.

import (
	"context"
	"database/sql"
	"time"

	"gorm.io/gorm"
)

// The states of an alert episode.
const (
	EpisodePending  = "pending"  // the condition holds, not yet for long enough
	EpisodeFiring   = "firing"   // the condition holds
	EpisodeResolved = "resolved" // the condition no longer holds
	EpisodeOnce     = "once"     // done once for its key, never again (a day's digest)
)

// AlertEpisode is one stretch of time during which a rule's condition held
// for one key.
type AlertEpisode struct {
	ID                   int64
	Rule, Key, State     string
	Kind, Queue, Summary string
	StartedAt            time.Time
	FiredAt, ResolvedAt  *time.Time
	// Notified is true once the episode's firing notice was recorded.
	Notified bool
}

// AlertNotice is a notification owed to one sink.
type AlertNotice struct {
	ID        int64
	EventID   string
	EpisodeID int64 // 0: none
	Sink      string
	Body      []byte
	CreatedAt time.Time
	NextAt    time.Time
	Attempts  int
	LastError string
	SentAt    *time.Time
}

// AlertSilence mutes the notifications of a rule's episodes, of a kind and
// of a queue where they are not empty, until a time.
type AlertSilence struct {
	ID                int64
	Rule, Kind, Queue string
	Until             time.Time
	Actor, Reason     string
	CreatedAt         time.Time
}

// ignoring returns how an INSERT of st skips rows whose unique key is
// taken (before INTO, or at the end), and the episodes' column key. On
// MariaDB, INSERT IGNORE: its ON DUPLICATE KEY UPDATE would return the
// row found, and KEY is a reserved word there.
func ignoring(st Store) (ignore, key, conflict string) {
	if st.Dialect() == "mysql" {
		return "IGNORE ", "`key`", ""
	}
	return "", "key", "ON CONFLICT DO NOTHING"
}

// bindTime returns t as st compares times.
func bindTime(st Store, t time.Time) any { return timeArg(st)(t) }

func bindNullTime(st Store, t *time.Time) any {
	if t == nil {
		return nil
	}
	return bindTime(st, *t)
}

// episodeColumns name key by its table: KEY is a reserved word in
// MariaDB, but not after a table's name.
const episodeColumns = "id, rule, sheaf_alert_episodes.key, state, kind, queue, summary, started_at, fired_at, resolved_at, notified"

func scanEpisode(rows *sql.Rows, e *AlertEpisode) error {
	var started, fired, resolved sqlTime
	err := rows.Scan(&e.ID, &e.Rule, &e.Key, &e.State, &e.Kind, &e.Queue, &e.Summary, &started, &fired, &resolved, &e.Notified)
	e.StartedAt, e.FiredAt, e.ResolvedAt = started.t, fired.ptr(), resolved.ptr()
	return err
}

// OpenEpisodes returns the pending and firing episodes, by ID.
func OpenEpisodes(ctx context.Context, db *gorm.DB) ([]AlertEpisode, error) {
	return collect(ctx, db, scanEpisode, "SELECT "+episodeColumns+
		" FROM sheaf_alert_episodes WHERE state IN ('pending', 'firing') ORDER BY id")
}

// RecentEpisodes returns at most limit episodes of the states given (all,
// if none), newest first, with IDs below before (0: no bound).
func RecentEpisodes(ctx context.Context, db *gorm.DB, states []string, before int64, limit int) ([]AlertEpisode, error) {
	if len(states) == 0 {
		states = []string{EpisodePending, EpisodeFiring, EpisodeResolved, EpisodeOnce}
	}
	if before <= 0 {
		before = 1<<63 - 1
	}
	return collect(ctx, db, scanEpisode, "SELECT "+episodeColumns+
		" FROM sheaf_alert_episodes WHERE state IN ? AND id < ? ORDER BY id DESC LIMIT ?", states, before, limit)
}

// InsertEpisode opens e unless an open episode of its rule and key exists
// (or, for EpisodeOnce, any of them ever did), and returns its ID, 0 when
// it was there already. The notices are recorded with it, in the same
// transaction, their EpisodeID set.
func InsertEpisode(ctx context.Context, st Store, db *gorm.DB, e AlertEpisode, notices []AlertNotice) (id int64, err error) {
	err = st.Tx(ctx, db, func(tx *gorm.DB) error {
		ignore, key, conflict := ignoring(st)
		rows, err := tx.Raw(`INSERT `+ignore+`INTO sheaf_alert_episodes (rule, `+key+`, state, kind, queue, summary, started_at, fired_at, resolved_at, notified)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) `+conflict+` RETURNING id`,
			e.Rule, e.Key, e.State, e.Kind, e.Queue, e.Summary, bindTime(st, e.StartedAt), bindNullTime(st, e.FiredAt),
			bindNullTime(st, e.ResolvedAt), e.Notified).Rows()
		if err != nil {
			return err
		}
		ids, err := scanColumn[int64](rows)
		if err != nil || len(ids) == 0 {
			return err
		}
		id = ids[0]
		return insertNotices(tx, st, id, notices)
	})
	return id, err
}

// UpdateEpisode writes e's state, summary, times and Notified if the
// episode is still in state was with notified wasNotified (another
// alerter has not moved it meanwhile), and records the notices with the
// change, in the same transaction. It reports whether it changed the
// episode; when it did not, it recorded nothing.
func UpdateEpisode(ctx context.Context, st Store, db *gorm.DB, e AlertEpisode, was string, wasNotified bool, notices []AlertNotice) (changed bool, err error) {
	err = st.Tx(ctx, db, func(tx *gorm.DB) error {
		res := tx.Exec(`UPDATE sheaf_alert_episodes SET state = ?, summary = ?, fired_at = ?, resolved_at = ?, notified = ?
			WHERE id = ? AND state = ? AND notified = ?`,
			e.State, e.Summary, bindNullTime(st, e.FiredAt), bindNullTime(st, e.ResolvedAt), e.Notified, e.ID, was, wasNotified)
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		changed = true
		return insertNotices(tx, st, e.ID, notices)
	})
	return changed, err
}

func insertNotices(tx *gorm.DB, st Store, episode int64, notices []AlertNotice) error {
	ignore, _, conflict := ignoring(st)
	for _, n := range notices {
		if err := tx.Exec(`INSERT `+ignore+`INTO sheaf_alert_notices (event_id, episode_id, sink, body, created_at, next_at)
			VALUES (?, ?, ?, ?, ?, ?) `+conflict,
			n.EventID, episode, n.Sink, n.Body, bindTime(st, n.CreatedAt), bindTime(st, n.NextAt)).Error; err != nil {
			return err
		}
	}
	return nil
}

const noticeColumns = "id, event_id, coalesce(episode_id, 0), sink, body, created_at, next_at, attempts, coalesce(last_error, ''), sent_at"

func scanNotice(rows *sql.Rows, n *AlertNotice) error {
	var created, next, sent sqlTime
	err := rows.Scan(&n.ID, &n.EventID, &n.EpisodeID, &n.Sink, &n.Body, &created, &next, &n.Attempts, &n.LastError, &sent)
	n.CreatedAt, n.NextAt, n.SentAt = created.t, next.t, sent.ptr()
	return err
}

// DueNotices returns at most limit unsent notices due at now, oldest
// first.
func DueNotices(ctx context.Context, st Store, db *gorm.DB, now time.Time, limit int) ([]AlertNotice, error) {
	return collect(ctx, db, scanNotice, "SELECT "+noticeColumns+
		" FROM sheaf_alert_notices WHERE sent_at IS NULL AND next_at <= ? ORDER BY id LIMIT ?", bindTime(st, now), limit)
}

// NextNotice returns when the earliest unsent notice is due, and false if
// none is unsent.
func NextNotice(ctx context.Context, db *gorm.DB) (time.Time, bool, error) {
	var at sqlTime
	err := db.WithContext(ctx).Raw("SELECT min(next_at) FROM sheaf_alert_notices WHERE sent_at IS NULL").Row().Scan(&at)
	return at.t, at.valid, err
}

// EpisodeNotices returns the notices of an episode, by ID.
func EpisodeNotices(ctx context.Context, db *gorm.DB, episode int64) ([]AlertNotice, error) {
	return collect(ctx, db, scanNotice, "SELECT "+noticeColumns+
		" FROM sheaf_alert_notices WHERE episode_id = ? ORDER BY id", episode)
}

// ClaimNotice takes notice n for a send: it counts the attempt and moves
// the notice's next try to retryAt, unless another alerter took it first
// (its attempts moved on) or it was sent. It reports whether it took it.
func ClaimNotice(ctx context.Context, st Store, db *gorm.DB, n AlertNotice, retryAt time.Time) (bool, error) {
	var changed int64
	err := st.Tx(ctx, db, func(tx *gorm.DB) error {
		res := tx.Exec("UPDATE sheaf_alert_notices SET attempts = attempts + 1, next_at = ? WHERE id = ? AND attempts = ? AND sent_at IS NULL",
			bindTime(st, retryAt), n.ID, n.Attempts)
		changed = res.RowsAffected
		return res.Error
	})
	return changed == 1, err
}

// NoticeSent marks notice id sent at.
func NoticeSent(ctx context.Context, st Store, db *gorm.DB, id int64, at time.Time) error {
	return st.Tx(ctx, db, func(tx *gorm.DB) error {
		return tx.Exec("UPDATE sheaf_alert_notices SET sent_at = ?, last_error = NULL WHERE id = ?", bindTime(st, at), id).Error
	})
}

// NoticeFailed records why a send of notice id failed; its next try is
// the one ClaimNotice set.
func NoticeFailed(ctx context.Context, st Store, db *gorm.DB, id int64, msg string) error {
	return st.Tx(ctx, db, func(tx *gorm.DB) error {
		return tx.Exec("UPDATE sheaf_alert_notices SET last_error = ? WHERE id = ?", msg, id).Error
	})
}

// AddSilence records s and returns its ID.
func AddSilence(ctx context.Context, st Store, db *gorm.DB, s AlertSilence) (id int64, err error) {
	err = st.Tx(ctx, db, func(tx *gorm.DB) error {
		return tx.Raw(`INSERT INTO sheaf_alert_silences (rule, kind, queue, until, actor, reason, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`,
			s.Rule, s.Kind, s.Queue, bindTime(st, s.Until), s.Actor, s.Reason, bindTime(st, s.CreatedAt)).Row().Scan(&id)
	})
	return id, err
}

// DeleteSilence deletes silence id and reports whether it was there.
func DeleteSilence(ctx context.Context, st Store, db *gorm.DB, id int64) (bool, error) {
	var n int64
	err := st.Tx(ctx, db, func(tx *gorm.DB) error {
		res := tx.Exec("DELETE FROM sheaf_alert_silences WHERE id = ?", id)
		n = res.RowsAffected
		return res.Error
	})
	return n == 1, err
}

// Silences returns the silences that last beyond at, by ID.
func Silences(ctx context.Context, st Store, db *gorm.DB, at time.Time) ([]AlertSilence, error) {
	return collect(ctx, db, func(rows *sql.Rows, s *AlertSilence) error {
		var until, created sqlTime
		err := rows.Scan(&s.ID, &s.Rule, &s.Kind, &s.Queue, &until, &s.Actor, &s.Reason, &created)
		s.Until, s.CreatedAt = until.t, created.t
		return err
	}, "SELECT id, rule, kind, queue, until, actor, reason, created_at FROM sheaf_alert_silences WHERE until > ? ORDER BY id",
		bindTime(st, at))
}

// PruneAlerts deletes, in one transaction, at most limit alert episodes
// that ended before before (resolved then, or done once and begun then)
// and whose every notice is sent, with their notices, and the silences
// that ended before it.
// An unsent notice, and its episode, stay until they are sent. It returns
// how many episodes it deleted.
func PruneAlerts(ctx context.Context, st Store, db *gorm.DB, before time.Time, limit int) (int64, error) {
	at := bindTime(st, before)
	var n int64
	err := st.Tx(ctx, db, func(tx *gorm.DB) error {
		var ids []int64
		err := tx.Raw(`SELECT e.id FROM sheaf_alert_episodes e
			WHERE ((e.state = ? AND e.resolved_at < ?) OR (e.state = ? AND e.started_at < ?))
			AND NOT EXISTS (SELECT 1 FROM sheaf_alert_notices n WHERE n.episode_id = e.id AND n.sent_at IS NULL)
			ORDER BY e.id LIMIT ?`, EpisodeResolved, at, EpisodeOnce, at, limit).Scan(&ids).Error
		if err != nil {
			return err
		}
		if len(ids) > 0 {
			if err := tx.Exec("DELETE FROM sheaf_alert_notices WHERE episode_id IN ?", ids).Error; err != nil {
				return err
			}
			if err := tx.Exec("DELETE FROM sheaf_alert_episodes WHERE id IN ?", ids).Error; err != nil {
				return err
			}
		}
		n = int64(len(ids))
		return tx.Exec("DELETE FROM sheaf_alert_silences WHERE until < ?", at).Error
	})
	return n, err
}
