package pgtest

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// refusing is a connector the server refuses while full times, then serves.
type refusing struct {
	full  int
	calls int
}

func (r *refusing) Connect(context.Context) (driver.Conn, error) {
	if r.calls++; r.calls <= r.full {
		return nil, &pgconn.PgError{Severity: "FATAL", Code: "53300", Message: "sorry, too many clients already"}
	}
	return nil, errors.New("served") // the connection itself is not the point
}

func (*refusing) Driver() driver.Driver { return nil }

// A pool's connector waits while the server is full, and returns at once
// any other outcome; its wait ends with its context.
func TestPatientConnectorWaitsWhileTheServerIsFull(t *testing.T) {
	t.Parallel()
	r := &refusing{full: 2}
	_, err := patient{r}.Connect(context.Background())
	require.EqualError(t, err, "served")
	require.Equal(t, 3, r.calls)

	r = &refusing{full: 1 << 30}
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	_, err = patient{r}.Connect(ctx)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "53300", pgErr.Code)
	require.Less(t, r.calls, 10, "it paused between tries")
}

// The pools waiting with their schemas keep parkedBudget idle connections
// between them, the newest first; a waiting pool that gave up its
// connections still serves its next test; shed closes them all.
func TestParkedPoolsKeepABudgetOfIdleConnections(t *testing.T) {
	migrate := func(db *gorm.DB) error { return db.Exec("CREATE TABLE items (id int)").Error }
	const pools = parkedBudget/parkedIdle + 1
	key := func(i int) string { return fmt.Sprintf("%s-%d", t.Name(), i) }
	parked := make([]*DB, pools)
	for i := range parked {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			db := NewMigrated(t, key(i), migrate)
			var conns []*sql.Conn
			for range parkedIdle + 2 { // more than it may keep
				c, err := db.SQL.Conn(context.Background())
				require.NoError(t, err)
				conns = append(conns, c)
			}
			for _, c := range conns {
				require.NoError(t, c.Close())
			}
			parked[i] = db
		})
	}
	idle := func() (n int) {
		parkedPools.mu.Lock()
		defer parkedPools.mu.Unlock()
		for _, db := range parkedPools.dbs {
			n += db.Stats().Idle
		}
		return n
	}
	require.LessOrEqual(t, idle(), parkedBudget)
	require.Zero(t, parked[0].SQL.Stats().Idle, "the oldest gave its connections up")
	require.Equal(t, parkedIdle, parked[pools-1].SQL.Stats().Idle, "the newest kept its own")

	shed()
	require.Zero(t, parked[pools-1].SQL.Stats().Idle)
	reused.mu.Lock()
	require.Empty(t, reused.idle)
	reused.mu.Unlock()

	t.Run("again", func(t *testing.T) {
		db := NewMigrated(t, key(0), migrate)
		require.Same(t, parked[0], db)
		require.Zero(t, db.Count(t, "SELECT count(*) FROM items"))
	})
}
