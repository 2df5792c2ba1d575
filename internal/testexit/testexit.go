// Package testexit ends sheaf's test binaries without the race detector's
// wait.
//
// A binary built with -race sleeps for a second as it exits with status 0,
// so that the race detector can catch goroutines that race while the
// program ends (GORACE's atexit_sleep_ms, 1000 by default). sheaf's
// TestMains check with goleak that no goroutine outlives the tests, so the
// second finds nothing to catch; over the repository's fifty-odd test
// binaries it is half a minute of go test -race ./... on two cores.
// A race seen during the tests still fails them: the testing package
// reports it as each test ends.
package testexit

import (
	"os"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// Option makes goleak.VerifyTestMain end the binary with Exit:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }
func Option() goleak.Option { return goleak.Cleanup(Exit) }

// Exit ends the process with code. After a passing run of a binary built
// with -race and without coverage, it exits at once rather than through
// os.Exit, whose hook runs the race detector's final wait; otherwise it is
// os.Exit.
func Exit(code int) {
	if code == 0 && raceEnabled && testing.CoverMode() == "" {
		syscall.Exit(0)
	}
	os.Exit(code)
}
