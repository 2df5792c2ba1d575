package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// copiedRow is what Copy writes of a job.
type copiedRow struct {
	ID                       int64
	Kind, Queue, Status      string
	Priority, MaxAttempts    int
	Attempts                 int
	Payload                  []byte
	IdempotencyKey           *string
	CorrelationID            *string
	Backoff, Auth            *string
	RunID, Period, ParentIDs *string
	RunAt, CreatedAt         time.Time
}

func (copiedRow) TableName() string { return store.JobsTable }

// Copy stores each job as Insert would, in order, whether the other jobs
// share its values or not, across more jobs than one statement of the
// SQLite store takes; and wakes the runners of the queues that got due
// jobs.
func TestCopyWritesWhatInsertWrites(t *testing.T) {
	forEachMigrated(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		notices := listen(t, st)

		// Alike but for their payloads and one priority; one full
		// statement of SQLite's and part of another.
		alike := make([]store.NewJob, store.SQLiteCopyRows+3)
		for i := range alike {
			alike[i] = store.NewJob{Kind: "k", Queue: "q", Priority: 5, Attempts: 3, Payload: fmt.Sprintf(`{"n":%d}`, i)}
		}
		alike[len(alike)-1].Priority = 7
		// Each value differs in some job.
		mixed := slices.Clone(alike)
		text := func(s string) *string { return &s }
		at := time.Date(2031, 5, 6, 7, 8, 9, 123456000, time.UTC)
		mixed[1] = store.NewJob{Kind: "other", Queue: "later", Priority: 9, Attempts: 1, Payload: `{}`,
			Correlation: text("c"), Backoff: text(`{"kind":"linear","base":1000000000}`), Auth: text(`{"sub":"u"}`),
			RunID: text("r"), Period: text("p"), RunAt: &at}
		mixed[store.SQLiteCopyRows+1].Delay = time.Hour
		mixed[store.SQLiteCopyRows+1].Queue = "later"
		// Characters that end a field or a row of a file, or escape.
		odd := "tab\there\nnew line\r\\N \\ backslash é"
		mixed[2].Correlation, mixed[2].Period, mixed[2].Payload = text(odd), text(`\N`), `{"s":"a\\tb\n\\ é"}`
		mixed[2].Metadata = []byte{0, '\t', '\n', '\\', 'N', 0xff, 0xfe}

		var after, loads int64
		for _, jobs := range [][]store.NewJob{alike, mixed} {
			n, err := st.Copy(ctx, jobs)
			require.NoError(t, err)
			require.Equal(t, int64(len(jobs)), n)
			if st.Dialect() == "mysql" {
				loads++
				require.Equal(t, loads, store.MySQLLoads(st), "LOAD DATA stored the jobs, not the INSERT it falls back on")
			}
			var copied []copiedRow
			require.NoError(t, st.Jobs(ctx, db, store.Filter{AfterID: after}, 0, &copied))
			var inserted []copiedRow
			require.NoError(t, st.Insert(ctx, db, jobs, &inserted))
			after = inserted[len(inserted)-1].ID
			requireCopied(t, jobs, copied, inserted)
			for i := range 3 {
				var c, in []byte
				require.NoError(t, db.Raw("SELECT meta FROM sheaf_jobs WHERE id = ?", copied[i].ID).Row().Scan(&c))
				require.NoError(t, db.Raw("SELECT meta FROM sheaf_jobs WHERE id = ?", inserted[i].ID).Row().Scan(&in))
				require.Equal(t, in, c, "job %d's metadata", i)
			}
			// Copy's notice, then Insert's: q's top due priority each
			// time, and none for later, whose jobs are not due.
			for range 2 {
				select {
				case got := <-notices:
					require.True(t, strings.HasSuffix(got, "q:7"), got)
				case <-time.After(10 * time.Second):
					t.Fatal("no notice")
				}
			}
		}
		select {
		case got := <-notices:
			t.Fatalf("unexpected notice %q", got)
		case <-time.After(100 * time.Millisecond):
		}
		if st.Dialect() == "sqlite" {
			var texts int64
			require.NoError(t, db.Raw("SELECT count(*) FROM sheaf_jobs WHERE typeof(payload) <> 'blob'").Scan(&texts).Error)
			require.Zero(t, texts, "payloads are bytes, as the driver hands JSON over")
		}
	})
}

// listen returns the payloads of st's notices of due jobs.
func listen(t *testing.T, st store.Store) <-chan string {
	ready := make(chan struct{})
	notices := make(chan string, 16)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { stop(); <-done })
	go func() {
		defer close(done)
		_ = st.Listen(ctx, func() { close(ready) }, func(channel, payload string) {
			if channel == store.JobsChannel {
				notices <- payload
			}
		})
	}()
	<-ready
	return notices
}

// requireCopied checks the rows Copy wrote of jobs against those Insert
// wrote of them.
func requireCopied(t *testing.T, jobs []store.NewJob, copied, inserted []copiedRow) {
	t.Helper()
	require.Len(t, copied, len(jobs))
	for i, c := range copied {
		in := inserted[i]
		for _, p := range []struct{ got, want any }{
			{c.Kind, in.Kind}, {c.Queue, in.Queue}, {c.Status, in.Status}, {c.Priority, in.Priority},
			{c.MaxAttempts, in.MaxAttempts}, {c.Attempts, in.Attempts}, {c.IdempotencyKey, in.IdempotencyKey},
			{c.CorrelationID, in.CorrelationID}, {c.RunID, in.RunID}, {c.Period, in.Period}, {c.ParentIDs, in.ParentIDs},
		} {
			require.Equal(t, p.want, p.got, "job %d", i)
		}
		if r := jobs[i].RunAt; r != nil {
			require.True(t, c.RunAt.Equal(*r), "job %d: run at %v", i, c.RunAt)
		} else {
			require.Equal(t, jobs[i].Delay, c.RunAt.Sub(c.CreatedAt), "job %d", i)
		}
		require.JSONEq(t, string(in.Payload), string(c.Payload), "job %d", i)
		for _, p := range [][2]*string{{c.Backoff, in.Backoff}, {c.Auth, in.Auth}} {
			require.Equal(t, p[1] == nil, p[0] == nil, "job %d", i)
			if p[0] != nil {
				require.JSONEq(t, *p[1], *p[0], "job %d", i)
			}
		}
	}
}

// On MariaDB, a job the server cannot store as given fails the whole Copy
// with INSERT's error, though LOAD DATA from a client's file would only
// have warned and cut the value; no job of the call is stored.
func TestCopyOnMariaDBStoresAllOrNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		if st.Dialect() != "mysql" {
			t.Skip("MariaDB's LOAD DATA")
		}
		ctx := context.Background()
		_, err := st.Migrate(ctx)
		require.NoError(t, err)
		jobs := []store.NewJob{
			{Kind: "k", Queue: "q", Priority: 5, Attempts: 3, Payload: `{}`},
			{Kind: strings.Repeat("k", 300), Queue: "q", Priority: 5, Attempts: 3, Payload: `{}`},
		}
		_, err = st.Copy(ctx, jobs)
		require.ErrorContains(t, err, "Data too long")
		var n int64
		require.NoError(t, db.Raw("SELECT count(*) FROM sheaf_jobs").Scan(&n).Error)
		require.Zero(t, n)
		require.Zero(t, store.MySQLLoads(st))
	})
}
