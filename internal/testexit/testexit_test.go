package testexit_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
)

// childCode, when set, makes the binary a child that only exits with it.
const (
	childCode = "SHEAF_TESTEXIT_CODE"
	// childMark names a file the child's AtExit functions write to.
	childMark = "SHEAF_TESTEXIT_MARK"
	// childChecked, when set, makes the binary a child that runs its
	// (no) tests wrapped with M, writing to the file it names what its
	// BeforeCheck and AtExit functions do, in their order.
	childChecked = "SHEAF_TESTEXIT_CHECKED"
)

// write appends s to the file mark.
func write(mark, s string) {
	f, err := os.OpenFile(mark, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		panic(err)
	}
	_, _ = f.WriteString(s)
	_ = f.Close()
}

func TestMain(m *testing.M) {
	if mark := os.Getenv(childChecked); mark != "" {
		testexit.AtExit(func() { write(mark, "at exit;") })
		if testexit.BeforeCheck(func() {}) {
			write(mark, "kept before M;")
		}
		tm := testexit.M(m)
		if testexit.BeforeCheck(func() { write(mark, "before the check;") }) {
			write(mark, "kept;")
		}
		goleak.VerifyTestMain(tm, testexit.Option())
	}
	if code := os.Getenv(childCode); code != "" {
		n, err := strconv.Atoi(code)
		if err != nil {
			panic(err)
		}
		if mark := os.Getenv(childMark); mark != "" {
			for _, s := range []string{"first given;", "last given;"} {
				testexit.AtExit(func() { write(mark, s) })
			}
		}
		testexit.Exit(n)
	}
	goleak.VerifyTestMain(m, testexit.Option())
}

// child runs this binary as a child that exits with code, under a race
// detector told to wait a minute at a clean exit, and returns its exit
// status and how long it took.
func child(t *testing.T, code int, env ...string) (int, time.Duration) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childCode+"="+strconv.Itoa(code), "GORACE=atexit_sleep_ms=60000"), env...)
	began := time.Now()
	err := cmd.Run()
	took := time.Since(began)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), took
	}
	require.NoError(t, err)
	return 0, took
}

// The exit code reaches the parent as it is, and a clean exit does not
// wait for the race detector (a minute here, for the difference to stand
// out on a loaded machine).
func TestExitKeepsTheCodeAndSkipsTheWait(t *testing.T) {
	t.Parallel()
	code, took := child(t, 0)
	require.Equal(t, 0, code)
	require.Less(t, took, 30*time.Second, "the clean exit waited for the race detector")

	code, _ = child(t, 3)
	require.Equal(t, 3, code)
}

// What AtExit was given runs as the process ends, the last given first,
// whatever the exit code.
func TestAtExitRunsBeforeTheProcessEnds(t *testing.T) {
	t.Parallel()
	for _, code := range []int{0, 4} {
		mark := filepath.Join(t.TempDir(), "mark")
		got, _ := child(t, code, childMark+"="+mark)
		require.Equal(t, code, got)
		b, err := os.ReadFile(mark)
		require.NoError(t, err)
		require.Equal(t, "last given;first given;", string(b))
	}
}

// BeforeCheck keeps nothing, and says so, until M wraps the tests; then
// what it was given runs after the tests, before the functions given to
// AtExit.
func TestBeforeCheckRunsAfterTheTestsOnceMWrapsThem(t *testing.T) {
	t.Parallel()
	mark := filepath.Join(t.TempDir(), "mark")
	got, _ := child(t, 0, childChecked+"="+mark)
	require.Equal(t, 0, got)
	b, err := os.ReadFile(mark)
	require.NoError(t, err)
	require.Equal(t, "kept;before the check;at exit;", string(b))
}
