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
	"slices"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// Option makes goleak.VerifyTestMain end the binary with Exit:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }
func Option() goleak.Option { return goleak.Cleanup(Exit) }

// atExit is what AtExit was given.
var atExit struct {
	sync.Mutex
	fns []func()
}

// AtExit has Exit call f before the process ends, after goleak has looked
// for leaks: for what a test helper keeps for the whole process (schemas
// reused from test to test) and must drop when it ends. The last f given
// runs first.
func AtExit(f func()) {
	atExit.Lock()
	defer atExit.Unlock()
	atExit.fns = append(atExit.fns, f)
}

// Exit ends the process with code, after the functions given to AtExit
// have run. After a passing run of a binary built
// with -race and without coverage, it exits at once rather than through
// os.Exit, whose hook runs the race detector's final wait; otherwise it is
// os.Exit.
func Exit(code int) {
	atExit.Lock()
	fns := slices.Clone(atExit.fns)
	atExit.fns = nil
	atExit.Unlock()
	for _, f := range slices.Backward(fns) {
		f()
	}
	if code == 0 && raceEnabled && testing.CoverMode() == "" {
		syscall.Exit(0)
	}
	os.Exit(code)
}
