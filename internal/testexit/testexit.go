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

// M wraps m, for goleak.VerifyTestMain, so that once m has run the tests
// the functions given to BeforeCheck run, before goleak looks for leaks:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(testexit.M(m), testexit.Option()) }
func M(m goleak.TestingM) goleak.TestingM {
	beforeCheck.Lock()
	wrapped = true
	beforeCheck.Unlock()
	return checked{m}
}

// checked is a goleak.TestingM that runs the functions given to
// BeforeCheck after its tests.
type checked struct{ m goleak.TestingM }

func (c checked) Run() int {
	code := c.m.Run()
	beforeCheck.run()
	return code
}

// hooks are functions to run, the last given first.
type hooks struct {
	sync.Mutex
	fns []func()
}

// run runs the functions given so far, once.
func (h *hooks) run() {
	h.Lock()
	fns := slices.Clone(h.fns)
	h.fns = nil
	h.Unlock()
	for _, f := range slices.Backward(fns) {
		f()
	}
}

var (
	// beforeCheck is what BeforeCheck was given; wrapped, which its mutex
	// guards, whether M wraps the binary's tests.
	beforeCheck hooks
	wrapped     bool
	// atExit is what AtExit was given.
	atExit hooks
)

// BeforeCheck has f run once the tests have run, before goleak looks for
// goroutines left running, and reports true: for what a test helper keeps
// from test to test that has goroutines of its own (a connection pool).
// It reports false, and keeps nothing, if the binary's TestMain does not
// wrap its tests with M: the caller must then not keep what f would end.
func BeforeCheck(f func()) bool {
	beforeCheck.Lock()
	defer beforeCheck.Unlock()
	if !wrapped {
		return false
	}
	beforeCheck.fns = append(beforeCheck.fns, f)
	return true
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
	atExit.run()
	if code == 0 && raceEnabled && testing.CoverMode() == "" {
		syscall.Exit(0)
	}
	os.Exit(code)
}
