package pgtest

import (
	"context"
	"database/sql/driver"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
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
