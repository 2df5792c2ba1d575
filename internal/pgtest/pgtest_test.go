package pgtest_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testexit.M(m), testexit.Option()) }

func TestSchemasAreIsolated(t *testing.T) {
	t.Parallel()
	a, b := pgtest.New(t), pgtest.New(t)
	require.NotEqual(t, a.Schema, b.Schema)
	require.NoError(t, a.Gorm.Exec("CREATE TABLE items (id int)").Error)
	require.NoError(t, a.Gorm.Exec("INSERT INTO items VALUES (1), (2)").Error)
	require.Equal(t, int64(2), a.Count(t, "SELECT count(*) FROM items"))
	require.Error(t, b.Gorm.Exec("SELECT * FROM items").Error, "b does not see a's table")

	var schema string
	require.NoError(t, a.SQL.QueryRow("SELECT current_schema()").Scan(&schema))
	require.Equal(t, a.Schema, schema)
}

func TestWithSearchPath(t *testing.T) {
	t.Parallel()
	dsn, err := pgtest.WithSearchPath("postgres://u:p@h:5432/db?sslmode=disable", "s1")
	require.NoError(t, err)
	require.Equal(t, "postgres://u:p@h:5432/db?application_name=s1&search_path=s1&sslmode=disable", dsn)
	_, err = pgtest.WithSearchPath("host=h dbname=db", "s1")
	require.ErrorContains(t, err, "must be a postgres:// URL")
}

func TestCountTakesBothPlaceholderStyles(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	require.Equal(t, int64(3), db.Count(t, "SELECT count(*) FROM generate_series(1, $1)", 3))
	require.Equal(t, int64(4), db.Count(t, "SELECT count(*) FROM generate_series(1, ?)", 4))
}

// On SQLite, Time binds a time as text that orders as the times do, whatever
// their zones, and NullTime binds nil as NULL.
func TestSQLiteTimesCompareAsTimes(t *testing.T) {
	t.Parallel()
	db := pgtest.NewSQLite(t)
	earlier := time.Date(2025, 12, 8, 12, 0, 0, 500_000_000, time.FixedZone("UTC+2", 2*60*60)) // 10:00:00.5 UTC
	later := time.Date(2025, 12, 8, 11, 0, 0, 0, time.UTC)
	var before, null bool
	require.NoError(t, db.SQL.QueryRow("SELECT ? < ?", db.Time(earlier), db.Time(later)).Scan(&before))
	require.True(t, before)
	require.NoError(t, db.SQL.QueryRow("SELECT ? IS NULL", db.NullTime(nil)).Scan(&null))
	require.True(t, null)
}

// childEnv marks the test binary that TestUnreachableServer starts; the
// value names the test that binary is to run.
const childEnv = "PGTEST_CHILD"

// unreachableDSN points at a port where nothing listens. Its password must not
// show in the message.
const unreachableDSN = "postgres://postgres:hunter2@127.0.0.1:1/test?sslmode=disable&connect_timeout=2"

// Without a server, New skips the test with a message saying what to do, or
// fails it when CI is set. The test binary runs itself as a child process on
// TestUnreachableServerChild, so that the skip and the failure happen to a
// test of their own.
func TestUnreachableServer(t *testing.T) {
	t.Parallel()
	const msg = "pgtest: PostgreSQL not reachable at postgres://postgres:***@127.0.0.1:1/test?"
	const advice = "start it, or point TEST_DATABASE_URL at a server"
	t.Run("skips", func(t *testing.T) {
		t.Parallel()
		out, err := runChild(t, false)
		require.NoError(t, err, "a skipped test passes:\n%s", out)
		require.Contains(t, out, "--- SKIP: TestUnreachableServerChild")
		require.Contains(t, out, msg)
		require.Contains(t, out, advice)
		require.NotContains(t, out, "hunter2", "the password is redacted")
		require.NotContains(t, out, "New returned")
	})
	t.Run("fails in CI", func(t *testing.T) {
		t.Parallel()
		out, err := runChild(t, true)
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "the child must run and fail:\n%s", out)
		require.NotEqual(t, 0, exit.ExitCode())
		require.Contains(t, out, "--- FAIL: TestUnreachableServerChild")
		require.Contains(t, out, msg)
		require.Contains(t, out, advice)
		require.NotContains(t, out, "hunter2", "the password is redacted")
		require.NotContains(t, out, "New returned", "the failure stops the test")
	})
}

// runChild runs TestUnreachableServerChild in a child process against
// unreachableDSN, with CI set or not, and returns its combined output.
func runChild(t *testing.T, ci bool) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestUnreachableServerChild$", "-test.v", "-test.count=1")
	env := []string{childEnv + "=TestUnreachableServerChild", "TEST_DATABASE_URL=" + unreachableDSN}
	// Under -race the child would sleep a second before exiting 0, in case
	// other goroutines report races; this child has none.
	race := "GORACE=atexit_sleep_ms=0"
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		switch name {
		case "CI", "TEST_DATABASE_URL", childEnv:
		case "GORACE":
			race += " " + value
		default:
			env = append(env, kv)
		}
	}
	env = append(env, race)
	if ci {
		env = append(env, "CI=1")
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	require.NoError(t, ctx.Err(), "the child did not finish in time:\n%s", out)
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run the test binary: %v", err)
	}
	return string(out), err
}

// TestUnreachableServerChild is TestUnreachableServer's child process; in a
// normal run it does nothing.
func TestUnreachableServerChild(t *testing.T) {
	if os.Getenv(childEnv) != t.Name() {
		t.Skip("runs as a child process of TestUnreachableServer")
	}
	pgtest.New(t)
	t.Error("New returned without a server")
}

func TestCPUMeter(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	m := pgtest.StartCPU(db)
	// Work on both sides: the server sums a series long enough to take
	// some of its clock ticks (10 ms each), and this process hashes.
	_, err := db.SQL.Exec("SELECT sum(g) FROM generate_series(1, 3000000) g")
	require.NoError(t, err)
	deadline := time.Now().Add(50 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = sha256.Sum256([]byte{byte(x)})
	}
	c := m.Stop()
	require.True(t, c.Known, "the server's backends should be readable on this machine")
	require.Positive(t, c.Server)
	require.Positive(t, c.Process)
}
