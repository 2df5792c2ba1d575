package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
	"github.com/sheaf-dev/sheaf/queue/mysqldb"
)

// On MariaDB, a claim sends its statements in batches where the
// connection allows several in one call (mysqldb's DSN), and one at a
// time where it does not; either way it claims the same jobs, records the
// same starts, and a statement that fails in a batch fails the claim and
// changes nothing.
func TestMariaDBClaimsBatchedOrNot(t *testing.T) {
	if pgtest.Store() != "mysql" {
		t.Skip("MariaDB's store: SHEAF_TEST_STORE=mysql")
	}
	t.Parallel()
	ctx := context.Background()
	for name, plain := range map[string]bool{"batched": false, "one at a time": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := pgtest.NewMySQL(t)
			require.NoError(t, migrate(db.Gorm))
			gdb := db.Gorm
			if plain {
				gdb = unbatched(t, db.DSN)
			}
			st, err := store.Open(gdb)
			require.NoError(t, err)
			multi, session := store.MySQLBatches(st)
			require.Equal(t, !plain, multi, "batches")
			require.Equal(t, !plain, session, "the session's isolation")

			insertKeyed(t, st, gdb, keyed("call", "", 5, 6), keyed("mail", "", 5, 6), keyed("free", "", 1, 3))
			_, err = st.SetLimit(ctx, gdb, store.Limit{Scope: store.ScopeKind, Target: "call", Rate: 5, Period: time.Hour})
			require.NoError(t, err)
			_, err = st.SetLimit(ctx, gdb, store.Limit{Scope: store.ScopeKind, Target: "mail", Concurrency: 5})
			require.NoError(t, err)
			conn := st.Hold(false)
			defer conn.Close()
			claim := func(n int, limited bool) []store.Claimed {
				t.Helper()
				got, err := conn.Claim(ctx, store.Claim{Queue: "q", N: n, Lease: time.Minute, Runner: "r", Limited: limited})
				require.NoError(t, err)
				for _, c := range got {
					require.Equal(t, 1, c.Attempts, "job %d read back as claimed", c.ID)
					require.NotNil(t, c.StartedAt)
				}
				return got
			}
			// The calls the rate allows, the mails the limit allows, and the
			// free jobs after them, by priority.
			var kinds []string
			for _, n := range []int{4, 4, 4, 4, 4} {
				for _, c := range claim(n, true) {
					kinds = append(kinds, c.Kind)
				}
			}
			require.Equal(t, slices.Concat(slices.Repeat([]string{"call"}, 5), slices.Repeat([]string{"mail"}, 5),
				slices.Repeat([]string{"free"}, 3)), kinds)
			require.Equal(t, map[string][2]int{"call": {5, 5}, "mail": {5, 0}}, runningAndStarted(t, st, gdb))
			// The plain claim, which no limit holds back.
			insertKeyed(t, st, gdb, keyed("free", "", 1, 2))
			kinds = nil
			for _, c := range claim(9, false) {
				kinds = append(kinds, c.Kind)
			}
			require.Equal(t, []string{"call", "mail", "free", "free"}, kinds)

			// A statement after the update fails (recording the starts): the
			// claim fails, and its jobs stay as they were.
			insertKeyed(t, st, gdb, keyed("call", "", 5, 1))
			_, err = st.SetLimit(ctx, gdb, store.Limit{Scope: store.ScopeKind, Target: "call", Rate: 100, Period: time.Hour})
			require.NoError(t, err)
			require.NoError(t, gdb.Exec(`CREATE TRIGGER boom BEFORE INSERT ON sheaf_limit_starts FOR EACH ROW
				SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'no starts today'`).Error)
			_, err = conn.Claim(ctx, store.Claim{Queue: "q", N: 4, Lease: time.Minute, Runner: "r", Limited: true})
			require.ErrorContains(t, err, "no starts today")
			var queued int64
			require.NoError(t, gdb.Raw("SELECT count(*) FROM sheaf_jobs WHERE status = 'QUEUED'").Scan(&queued).Error)
			require.Equal(t, int64(1), queued, "the failed claim changed nothing")
		})
	}
}

// unbatched opens the MariaDB database of dsn as mysqldb.Open does, but
// for several statements in a call, client-side arguments and the
// session's isolation.
func unbatched(t *testing.T, dsn string) *gorm.DB {
	t.Helper()
	full, err := mysqldb.DSN(dsn)
	require.NoError(t, err)
	cfg, err := gomysql.ParseDSN(full)
	require.NoError(t, err)
	cfg.MultiStatements, cfg.InterpolateParams = false, false
	delete(cfg.Params, "tx_isolation")
	gdb, err := gorm.Open(gormmysql.New(gormmysql.Config{DSN: cfg.FormatDSN()}), &gorm.Config{Logger: logger.Discard})
	require.NoError(t, err)
	sqlDB, err := gdb.DB()
	require.NoError(t, err)
	sqlDB.SetMaxOpenConns(4)
	t.Cleanup(func() { _ = sqlDB.Close() })
	return gdb
}
