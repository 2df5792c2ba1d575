package mysqldb_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/mysqldb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

// A program of the queue on PostgreSQL or SQLite links no MySQL driver:
// the store reaches MariaDB through gorm's dialector name alone.
func TestTheQueueDoesNotLinkTheDriver(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/sheaf-dev/sheaf/queue", "github.com/sheaf-dev/sheaf/queue/sqlitedb").Output()
	require.NoError(t, err)
	require.Contains(t, string(out), "gorm.io/gorm\n", "the listing holds the queue's dependencies")
	require.NotContains(t, strings.ToLower(string(out)), "mysql")
}

// DSN reads a driver DSN or a mysql:// URL and sets what the queue needs.
func TestDSN(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"root@tcp(127.0.0.1:3306)/jobs", "mysql://root@127.0.0.1:3306/jobs"} {
		dsn, err := mysqldb.DSN(in)
		require.NoError(t, err, in)
		require.True(t, strings.HasPrefix(dsn, "root@tcp(127.0.0.1:3306)/jobs?"), dsn)
		for _, want := range []string{"parseTime=true", "clientFoundRows=true", "interpolateParams=true",
			"multiStatements=true", "time_zone=%27%2B00%3A00%27", "tx_isolation=%27READ-COMMITTED%27"} {
			require.Contains(t, dsn, want, in)
		}
	}
	dsn, err := mysqldb.DSN("mysql://u:p%40ss@db:3307/jobs")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(dsn, "u:p@ss@tcp(db:3307)/jobs?"), dsn)
	for _, bad := range []string{"mysql://root@127.0.0.1:3306/", "root@tcp(127.0.0.1:3306)/", "not a dsn"} {
		_, err := mysqldb.DSN(bad)
		require.Error(t, err, bad)
	}
}

// A handle that binds times in the process's zone, or reads them as text,
// would mix them with the server's UTC: the queue refuses it, saying what
// to set.
func TestTheQueueRefusesAConnectionOutOfUTC(t *testing.T) {
	t.Parallel()
	db := pgtest.NewMySQL(t)
	full, err := mysqldb.DSN(db.DSN)
	require.NoError(t, err)
	for _, c := range []struct{ from, to, want string }{
		{"parseTime=true", "parseTime=true&loc=Europe%2FParis", "loc=UTC"}, // UTC is the driver's default
		{"parseTime=true", "parseTime=false", "parseTime=true"},
	} {
		gdb, err := gorm.Open(mysql.Open(strings.Replace(full, c.from, c.to, 1)), &gorm.Config{Logger: logger.Discard})
		require.NoError(t, err)
		_, err = queue.NewClient(gdb, queue.NewRegistry())
		require.ErrorContains(t, err, c.want)
		sqlDB, err := gdb.DB()
		require.NoError(t, err)
		require.NoError(t, sqlDB.Close())
	}
	c, err := queue.NewClient(db.Gorm, queue.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, c.Migrate(context.Background()))
}

// A limit set on MariaDB is kept and listed with its use.
func TestLimitsOnMariaDB(t *testing.T) {
	t.Parallel()
	db := pgtest.NewMySQL(t)
	c, err := queue.NewClient(db.Gorm, queue.NewRegistry())
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, c.Migrate(ctx))
	err = c.SetLimit(ctx, queue.Limit{Scope: queue.ScopeKind, Target: "report", Concurrency: 2})
	require.NoError(t, err)
	ls, err := c.Limits(ctx)
	require.NoError(t, err)
	require.Len(t, ls, 1)
	require.Equal(t, []any{queue.ScopeKind, "report", 2, 0}, []any{ls[0].Scope, ls[0].Target, ls[0].Concurrency, ls[0].Running})
}
